#!/usr/bin/env bash
# Installs what hack/ociimage and its tests need from Debian's packages,
# idempotently (a second run only checks):
#   - ca-certificates: the CA bundle of the handler's, TES API's and filer's
#     images (/etc/ssl/certs/ca-certificates.crt);
#   - busybox-static: the static busybox of the stand-in images;
#   - runc: the integration test runs the busybox stand-in and pause with it.
# Needs root for the packages (as in CI).
set -euo pipefail

log() { echo "image-deps: $*" >&2; }

missing=()
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
# Debian's busybox package is dynamically linked; busybox-static is not.
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' || missing+=(busybox-static)
command -v runc >/dev/null 2>&1 || missing+=(runc)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "need root to install ${missing[*]} (run as root, or apt-get install them by hand)"
    exit 1
  fi
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
log "ready: ca-certificates, busybox-static ($(/bin/busybox 2>&1 | head -1 | cut -d' ' -f2)), runc ($(runc --version | head -1 | cut -d' ' -f3))"
