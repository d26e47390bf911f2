#!/usr/bin/env bash
# Installs what the filer's tests and benchmark need, idempotently (a second
# run only checks):
#   - vsftpd and curl from Debian's packages;
#   - the FTP test user (teskftp), whose password the tests know;
#   - versitygw, an S3-compatible server, built from the Go module proxy into
#     ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/tools (not the checkout).
# Needs root for the packages and the user (as in CI).
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
TOOLS="${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/tools"
FTP_USER=teskftp
FTP_PASS=teskftp-test-pw # also in filer/servers_test.go; a local test account

log() { echo "filer-deps: $*" >&2; }

as_root() {
  if [ "$(id -u)" -ne 0 ]; then
    log "need root to $1 (run as root, or do it by hand)"
    exit 1
  fi
}

missing=()
command -v vsftpd >/dev/null 2>&1 || [ -x /usr/sbin/vsftpd ] || missing+=(vsftpd)
command -v curl >/dev/null 2>&1 || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  as_root "install ${missing[*]}"
  log "installing ${missing[*]}"
  apt-get update -qq
  # Packages' services must not start: the tests start their own servers.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# vsftpd changes into the user's home at login, before the tests' local_root.
FTP_HOME=/var/lib/$FTP_USER
if ! id "$FTP_USER" >/dev/null 2>&1; then
  as_root "create the FTP test user"
  log "creating user $FTP_USER"
  useradd --system --no-create-home --home-dir "$FTP_HOME" --shell /bin/sh "$FTP_USER"
fi
if [ "$(getent passwd "$FTP_USER" | cut -d: -f6)" != "$FTP_HOME" ]; then
  as_root "set the home of $FTP_USER"
  usermod --home "$FTP_HOME" "$FTP_USER"
fi
if [ ! -d "$FTP_HOME" ]; then
  as_root "create $FTP_HOME"
  install -d -o "$FTP_USER" -m 0755 "$FTP_HOME"
fi
# vsftpd's PAM config wants the user's shell listed in /etc/shells.
if ! grep -qx /bin/sh /etc/shells 2>/dev/null; then
  as_root "add /bin/sh to /etc/shells"
  echo /bin/sh >>/etc/shells
fi
# (Re)set the test password: cheap, and right whatever was there before.
if [ "$(id -u)" -eq 0 ]; then
  echo "$FTP_USER:$FTP_PASS" | chpasswd
fi

mkdir -p "$TOOLS"
if [ ! -x "$TOOLS/versitygw" ] || [ "$(cat "$TOOLS/versitygw.version" 2>/dev/null)" != "$VERSITYGW_VERSION" ]; then
  log "building versitygw $VERSITYGW_VERSION into $TOOLS (a few minutes on first run)"
  (cd / && GOBIN="$TOOLS" GOFLAGS= "${GO:-go}" install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION")
  echo "$VERSITYGW_VERSION" >"$TOOLS/versitygw.version"
fi
log "ready: vsftpd, curl, user $FTP_USER, $TOOLS/versitygw ($VERSITYGW_VERSION)"
