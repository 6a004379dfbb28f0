#!/usr/bin/env bash
# Install foresight-ndsp from this checkout into a temporary venv and run its
# tests against the real controller ($FORESIGHT_BIN, default
# target/release/foresight of the checkout).
#   run-tests.sh          client, sender and HLO-reader tests (no JAX)
#   run-tests.sh --jax    with jax[cpu] from PyPI (~100 MB): the JAX tests
#                         (a real 4-process jax.distributed step over gloo)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export FORESIGHT_BIN=${FORESIGHT_BIN:-$root/target/release/foresight}
if [ ! -x "$FORESIGHT_BIN" ]; then
  echo "SKIPPED python client tests: controller binary $FORESIGHT_BIN not found (cargo build --release -p foresight, or set FORESIGHT_BIN)"
  exit 0
fi
python=${FORESIGHT_BASE_PYTHON:-python3}
venv=$(mktemp -d "${TMPDIR:-/tmp}/foresight-ndsp-venv.XXXXXX")
trap 'rm -rf "$venv"' EXIT
"$python" -m venv "$venv"
extras=test; tests=(tests)
if [ "${1:-}" = --jax ]; then extras=test,jax; tests=(tests/test_jax.py); fi
"$venv/bin/pip" install -q --disable-pip-version-check "$here[$extras]"
cd "$here"
# -p no:cacheprovider: leave nothing behind in the checkout.
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "${tests[@]}"
