#!/usr/bin/env bash
# Run every Foresight test suite. Suites that need the P4 toolchain (p4c,
# BMv2 simple_switch_grpc) or Mininet run when those are found, on PATH or
# in $FORESIGHT_P4_PREFIX (default /opt/p4tools); otherwise each prints one
# SKIPPED line saying why. Exits non-zero if any suite fails.
set -uo pipefail
cd "$(dirname "$0")/.."
prefix=${FORESIGHT_P4_PREFIX:-/opt/p4tools}
tofino_prefix=${FORESIGHT_TOFINO_PREFIX:-/opt/p4c-tofino}
[ -d "$prefix/bin" ] && export PATH="$prefix/bin:$PATH"
export FORESIGHT_PYTHON=${FORESIGHT_PYTHON:-$PWD/.venv/bin/python}

passed=0; failed=0; skipped=0; failed_names=()
pass() { passed=$((passed + 1)); echo "== $1: passed"; }
fail() { failed=$((failed + 1)); failed_names+=("$1"); echo "== $1: FAILED"; }
skip() { skipped=$((skipped + 1)); echo "SKIPPED $1: $2"; }
suite() { local name=$1; shift; echo "== $name: $*"; if "$@"; then pass "$name"; else fail "$name"; fi; }

have_bmv2=; command -v simple_switch_grpc >/dev/null && have_bmv2=1
# p4c for BMv2: on PATH/prefix, or the Tofino-enabled p4c (its BMv2 backend).
have_p4c=; { command -v p4c >/dev/null || [ -x "$tofino_prefix/bin/p4c" ]; } && have_p4c=1
have_tofino_p4c=; [ -x "$tofino_prefix/bin/p4c-barefoot" ] && have_tofino_p4c=1
have_mininet=; /usr/bin/python3 -c 'import mininet' 2>/dev/null && [ "$(id -u)" = 0 ] && have_mininet=1

# 1. Rust: unit tests everywhere; the BMv2 integration tests need the switch.
[ -n "$have_bmv2" ] || skip "Rust BMv2 integration tests (controller/*/tests)" "simple_switch_grpc not found on PATH or in $prefix/bin; each prints its own SKIPPED line and returns early"
# --no-fail-fast: one failing test binary does not hide the others' results.
suite rust cargo test --workspace --release --no-fail-fast

# 2. Committed P4 artifacts must match what p4c produces now.
if [ -n "$have_p4c" ]; then suite p4-artifacts p4src/compile.sh --check --bmv2
else skip "P4 artifact freshness check (p4src/compile.sh --check --bmv2)" "p4c not found on PATH or in $prefix/bin or $tofino_prefix/bin"; fi
if [ -n "$have_tofino_p4c" ]; then suite p4-tna-artifacts p4src/compile.sh --check --tna
else skip "TNA artifact freshness check (p4src/compile.sh --check --tna)" "the Tofino p4c (p4c-barefoot) not found in $tofino_prefix/bin"; fi
# The TNA program's decision tables against the v1model logic (no compiler needed).
suite p4-tna-decisions python3 p4src/tna/check_decisions.py
# The lab's port shaper on a recorded run's reservations (no root, no BMv2).
suite bmv2-lab-shaper python3 bmv2-lab/test_shaper.py
# Every relative link and heading anchor in the Markdown docs resolves.
suite docs-links python3 ci/check_links.py

# 3. PTF packet tests of the data plane on BMv2.
if [ -x ptf-tests/run.sh ]; then
  if [ -n "$have_bmv2" ]; then suite ptf ptf-tests/run.sh
  else skip "PTF data-plane tests (ptf-tests/)" "simple_switch_grpc not found on PATH or in $prefix/bin"; fi
fi

# 4. Mininet smoke: a ping that passes only because of the routes Foresight
#    installs; the same run with a broken route must fail.
if [ -n "$have_bmv2" ] && [ -n "$have_mininet" ]; then
  cargo build --release -q -p foresight -p rocegen || fail "build foresight and rocegen"
  smoke=(/usr/bin/python3 bmv2-lab/smoke/smoke.py --foresight target/release/foresight --simple-switch-grpc "$(command -v simple_switch_grpc)")
  suite mininet-smoke "${smoke[@]}"
  echo "== mininet-smoke-negative: the same test with a wrong route must fail"
  # Its own failure lines are relabelled so that they do not read as one;
  # the switch log a failing run keeps goes in a directory removed after.
  negative_tmp=$(mktemp -d)
  TMPDIR=$negative_tmp "${smoke[@]}" --entries bmv2-lab/smoke/broken-entries.yaml \
    | sed -e 's/^mininet-smoke: /mininet-smoke with the broken route (must fail): /' -e 's/^FAIL: /failed as it must: /'
  if [ "${PIPESTATUS[0]}" = 0 ]; then fail mininet-smoke-negative; else pass mininet-smoke-negative; fi
  rm -rf "$negative_tmp"
  # 5. The lab: every topology up with the controller, all hosts reachable,
  #    nothing left behind (also after a crash), a short experiment.
  suite bmv2-lab /usr/bin/python3 bmv2-lab/test_lab.py
  # 6. The operator's web page in headless Chromium against the lab.
  suite bmv2-lab-ui /usr/bin/python3 bmv2-lab/test_ui.py --soak-s 60
else
  skip "Mininet smoke test (bmv2-lab/smoke)" "needs simple_switch_grpc, root and Debian's mininet for /usr/bin/python3"
  skip "bmv2-lab tests (bmv2-lab/test_lab.py)" "needs simple_switch_grpc, root and Debian's mininet for /usr/bin/python3"
  skip "web page browser test (bmv2-lab/test_ui.py)" "needs simple_switch_grpc, root and Debian's mininet for /usr/bin/python3"
fi

# 7. The Python NDSP client (clients/python) against the controller binary
#    the rust suite built: installed into a temporary venv from PyPI. The JAX
#    suite downloads jax[cpu] (~100 MB) and runs a 4-process JAX step;
#    FORESIGHT_SKIP_JAX=1 skips it.
if [ -x target/release/foresight ]; then
  suite python-client clients/python/run-tests.sh
  if [ -z "${FORESIGHT_SKIP_JAX:-}" ]; then suite python-client-jax clients/python/run-tests.sh --jax
  else skip "Python client JAX tests (clients/python/run-tests.sh --jax)" "FORESIGHT_SKIP_JAX is set"; fi
else
  skip "Python NDSP client tests (clients/python/run-tests.sh)" "target/release/foresight not built (the rust suite builds it)"
  skip "Python client JAX tests (clients/python/run-tests.sh --jax)" "target/release/foresight not built (the rust suite builds it)"
fi

echo
[ ${#failed_names[@]} -gt 0 ] && echo "failed suites: ${failed_names[*]}"
echo "suites: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
