#!/usr/bin/env bash
# Installs what the real node needs from Debian, once, and then only checks:
# runc, the CNI plugins (bridge, host-local, loopback in /usr/lib/cni),
# iptables, iproute2 and busybox-static (the stand-in images' busybox). Needs
# root, as the node itself does.
set -euo pipefail

need=()
[[ -x /usr/sbin/runc || -x /usr/bin/runc ]] || need+=(runc)
for p in bridge host-local loopback; do
	[[ -x /usr/lib/cni/$p ]] || { need+=(containernetworking-plugins); break; }
done
command -v iptables >/dev/null || need+=(iptables)
command -v ip >/dev/null || need+=(iproute2)
dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q "ok installed" || need+=(busybox-static)

if ((${#need[@]} == 0)); then
	echo "node packages: present (runc $(runc --version | sed -n 's/^runc version //p'))"
	exit 0
fi
if [[ $(id -u) != 0 ]]; then
	echo "node packages missing (${need[*]}): install them as root (apt-get install ${need[*]}); the real node needs root too" >&2
	exit 1
fi
echo "installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "node packages: installed ${need[*]}"
