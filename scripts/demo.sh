#!/usr/bin/env bash
# Builds qcg and runs a demo job: a token passed around 8 ranks on an embedded grid of
# 2 clusters with 2 nodes each (broker, frontals and helpers in one process, loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace --bins --examples
exec target/release/qcg run -n 8 --clusters 2 --nodes-per-cluster 2 --tag-output -- target/release/examples/ring 3
