#!/usr/bin/env bash
# Installs what the metrics test needs, as root: promtool (Debian's `prometheus`
# package), the Prometheus project's own checker of the text exposition format.
# Does nothing when it is there; safe to run again.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
if ! command -v promtool >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "metrics-deps.sh: promtool is missing: run as root: apt-get update && apt-get install -y prometheus" >&2
        exit 1
    fi
    echo "metrics-deps.sh: installing prometheus (for promtool)" >&2
    # --no-install-recommends: promtool alone, not the web console's extras.
    apt_install --no-install-recommends prometheus
fi
command -v promtool >/dev/null || {
    echo "metrics-deps.sh: prometheus installed but promtool is not on PATH" >&2
    exit 1
}
