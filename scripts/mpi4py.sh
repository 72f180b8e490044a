#!/usr/bin/env bash
# mpi4py built from source with qcg-mpicc, and its own test suite run under `qcg run`
# at 1, 2 and 5 ranks (2 clusters from 2 ranks up), leaving out what qcg does not
# provide (one-sided, I/O, dynamic processes, MPI 4; and
# test_util_sync, whose Sequential opens an MPI file, and test_util_pool, which spawns).
#
#   bash scripts/mpi4py.sh [VERSION]      (default 4.1.2; about 10 minutes)
#
# Needs the workspace's debug binaries (cargo build --workspace --bins) and Python 3
# with venv; everything else (Cython, mpi4py's sources) comes from PyPI into
# target/mpi4py. Prints each run's summary line; exits non-zero if a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-4.1.2}
ROOT=$PWD
BIN=$ROOT/target/debug
DIR=$ROOT/target/mpi4py
[ -x "$BIN/qcg-mpicc" ] && [ -x "$BIN/qcg" ] || {
    echo "mpi4py.sh: build first: cargo build --workspace --bins" >&2
    exit 2
}
mkdir -p "$DIR"
cd "$DIR"
if [ ! -x venv/bin/python ]; then
    python3 -m venv venv
fi
venv/bin/pip install -q setuptools wheel cython
# Built again when the headers changed (mpi4py compiles in what mpi.h offers).
HEADERS=$(cat "$ROOT"/mpi/include/mpi.h "$ROOT"/mpi/include/mpi_functions.h | sha256sum | cut -c1-16)
if ! venv/bin/python -c "import mpi4py; assert mpi4py.__version__ == '$VERSION'" 2>/dev/null \
    || [ "$(cat headers.stamp 2>/dev/null)" != "$HEADERS" ]; then
    venv/bin/pip uninstall -q -y mpi4py 2>/dev/null || true
    MPICC=$BIN/qcg-mpicc venv/bin/pip install -q --no-binary mpi4py --no-build-isolation \
        --no-cache-dir "mpi4py==$VERSION"
    echo "$HEADERS" > headers.stamp
fi
if [ ! -d "mpi4py-$VERSION/test" ]; then
    venv/bin/pip download -q --no-binary :all: --no-deps -d . "mpi4py==$VERSION"
    tar xzf "mpi4py-$VERSION.tar.gz" "mpi4py-$VERSION/test"
fi
cd "mpi4py-$VERSION"
EXCL='test_(rma|rma_nb|win|file|io|dynproc|spawn|session|ulfm|p2p_buf_part|cco_pr_buf|cco_pr_ngh_buf|cco_pr_vec|mpiabi|util_pool|util_sync)\.py$'
status=0
for n in 1 2 5; do
    clusters=""
    [ "$n" -gt 1 ] && clusters="--clusters 2"
    log=$DIR/test-$n.log
    # shellcheck disable=SC2086
    if "$BIN/qcg" run -n "$n" $clusters --tag-output --timeout 1200 -- "$DIR/venv/bin/python" test/main.py \
        --no-builddir -e "$EXCL" >"$log" 2>&1; then
        r=ok
    else
        r=failed
        status=1
    fi
    echo "$n rank(s): $r: $(grep -E '^\[0\] (Ran|OK|FAILED)' "$log" | tr '\n' ' ') ($log)"
done
exit $status
