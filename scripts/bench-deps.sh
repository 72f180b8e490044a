#!/usr/bin/env bash
# Reference tools the benchmarks run beside qcg: NPtcp (Debian netpipe-tcp) for netpipe,
# Open MPI with mpicc (openmpi-bin, libopenmpi-dev) for coll --lab. Run as root.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
missing=()
command -v NPtcp >/dev/null || missing+=(netpipe-tcp)
command -v mpirun >/dev/null || missing+=(openmpi-bin)
command -v mpicc >/dev/null || missing+=(libopenmpi-dev)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bench-deps.sh: missing ${missing[*]}: run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    apt_install "${missing[@]}"
fi
command -v NPtcp mpirun mpicc
