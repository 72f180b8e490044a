#!/usr/bin/env bash
# Installs what qcg-lab and its tests need, as root: ip and tc (iproute2), nft (nftables),
# kill (procps), and the TUN device. Does nothing when all is there; safe to run again.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
export PATH="$PATH:/usr/sbin:/sbin"
missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v tc >/dev/null || missing+=(iproute2)
command -v nft >/dev/null || missing+=(nftables)
[ -x /usr/bin/kill ] || [ -x /bin/kill ] || missing+=(procps)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "lab-deps.sh: missing ${missing[*]}: run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "lab-deps.sh: installing ${missing[*]}" >&2
    apt_install "${missing[@]}"
fi
if [ ! -e /dev/net/tun ]; then
    modprobe tun 2>/dev/null || true
fi
if [ ! -e /dev/net/tun ]; then
    echo "lab-deps.sh: /dev/net/tun is missing and \`modprobe tun\` did not make it" >&2
    exit 1
fi
