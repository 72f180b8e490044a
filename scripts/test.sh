#!/usr/bin/env bash
# The whole test suite, on a fresh machine with a Rust toolchain.
# The end-to-end tests start the real binaries and examples, so they are built first.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null; then
    echo "test.sh: cargo is required (install Rust with rustup)" >&2
    exit 1
fi
cargo build --workspace --bins --examples
cargo test --workspace
