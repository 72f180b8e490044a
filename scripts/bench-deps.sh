#!/usr/bin/env bash
# Reference tools the benchmarks run beside qcg: NPtcp (Debian netpipe-tcp).
set -euo pipefail
if ! command -v NPtcp >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq netpipe-tcp >/dev/null
fi
command -v NPtcp
