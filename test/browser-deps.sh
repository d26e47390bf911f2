#!/usr/bin/env bash
# Installs what the dashboard's browser tests need from Debian's packages,
# idempotently (a second run only checks):
#   - chromium: the headless browser the tests drive (chromedp);
#   - fonts-dejavu-core: a font for the pages and their screenshots.
# Needs root for the packages (as in CI).
set -euo pipefail

log() { echo "browser-deps: $*" >&2; }

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -d /usr/share/fonts/truetype/dejavu ] || missing+=(fonts-dejavu-core)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "need root to install ${missing[*]} (run as root, or apt-get install them by hand)"
    exit 1
  fi
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
log "ready: $(chromium --version 2>/dev/null | head -1)"
