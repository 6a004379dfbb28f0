#!/usr/bin/env bash
# Run Foresight's PTF tests against real BMv2 switches.
#
#   ptf-tests/run.sh                 all tests
#   ptf-tests/run.sh fs_sr fs_int    only these modules (any ptf test spec)
#
# Needs root (network namespace, veths). simple_switch_grpc comes from PATH
# or $FORESIGHT_P4_PREFIX/bin (default /opt/p4tools); without it the tests
# are skipped (exit 0). The pipeline is p4src/build/foresight.{json,p4info.txtpb}
# (p4src/compile.sh writes them).
#
# Topology, all inside a private network namespace fs-ptf-<pid>:
#   s1 (PTF device 0, ports 1-8), s2 (device 1, ports 1-4), s3 (device 2,
#   ports 1-4); every switch port is one end of a veth pair whose other end
#   PTF owns. gRPC on 127.0.0.1:9559/9560/9561, Thrift on 9090/9091/9092 (the
#   namespace's own loopback, so nothing clashes with the host).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
prefix=${FORESIGHT_P4_PREFIX:-/opt/p4tools}

ssg=$(command -v simple_switch_grpc || true)
if [ -z "$ssg" ] && [ -x "$prefix/bin/simple_switch_grpc" ]; then
  ssg=$prefix/bin/simple_switch_grpc
fi
if [ -z "$ssg" ]; then
  echo "SKIP ptf-tests: simple_switch_grpc not found (PATH or $prefix/bin; set FORESIGHT_P4_PREFIX)"
  exit 0
fi
bindir=$(dirname "$ssg")
libdir=$(dirname "$bindir")/lib
[ -d "$libdir" ] && export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The Thrift CLI is a Python 3 script installed with BMv2; its modules live
# under <prefix>/lib/python3.*/site-packages and it runs with the system
# python3 (Debian's python3-thrift), not the test venv.
cli_py=/usr/bin/python3
cli_site=$(ls -d "$libdir"/python3*/site-packages 2>/dev/null | head -1)
cli="env PYTHONPATH=$cli_site $cli_py $bindir/simple_switch_CLI"

venv=${FORESIGHT_VENV:-$repo/.venv}
python=$venv/bin/python
ptf=$venv/bin/ptf
build=${FS_PTF_BUILD:-$repo/p4src/build}   # override to test another build of the program
json=$build/foresight.json
p4info=$build/foresight.p4info.txtpb
for f in "$python" "$ptf"; do
  [ -x "$f" ] || { echo "ptf-tests: $f missing (Python venv with ptf, scapy, p4runtime)" >&2; exit 2; }
done
for f in "$json" "$p4info"; do
  [ -f "$f" ] || { echo "ptf-tests: $f missing; run p4src/compile.sh" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "ptf-tests: needs root (network namespace)" >&2; exit 2; }

ns=fs-ptf-$$
work=$(mktemp -d /tmp/fs-ptf.XXXXXX)
pids=()
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  ip netns del "$ns" 2>/dev/null
  if [ "${FS_PTF_KEEP_LOGS:-0}" = 1 ]; then echo "logs kept in $work"; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

nsx() { ip netns exec "$ns" "$@"; }

ip netns add "$ns" || { echo "ptf-tests: cannot create network namespace" >&2; exit 2; }
nsx ip link set lo up
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1

# switch name, PTF device / P4Runtime device id, number of ports
switches=("s1 0 8" "s2 1 4" "s3 2 4")
ptf_ifs=()
grpc_list=()
thrift_list=()
for spec in "${switches[@]}"; do
  read -r name dev nports <<<"$spec"
  sw_ifs=()
  for p in $(seq 1 "$nports"); do
    swif=sw${dev}p$p; ptif=pt${dev}p$p
    nsx ip link add "$swif" type veth peer name "$ptif"
    for i in "$swif" "$ptif"; do
      nsx ip link set "$i" mtu 9000 up
    done
    sw_ifs+=(-i "$p@$swif")
    ptf_ifs+=(-i "$dev-$p@$ptif")
  done
  grpc=$((9559 + dev)); thrift=$((9090 + dev))
  # Not through nsx: $! must be the switch's own PID (ip netns exec execs
  # the command), not a subshell's, so that cleanup can kill it.
  ip netns exec "$ns" "$ssg" --device-id "$dev" "${sw_ifs[@]}" --thrift-port "$thrift" \
      --no-p4 -- --grpc-server-addr "127.0.0.1:$grpc" --priority-queues 8 \
      >"$work/$name.log" 2>&1 &
  pids+=($!)
  grpc_list+=("$name=127.0.0.1:$grpc")
  thrift_list+=("$name=$thrift")
done

# Wait for every gRPC server, then push the pipeline once (a clear error
# here beats every test failing the same way).
switch_param=$(IFS=,; echo "${grpc_list[*]}")
thrift_param=$(IFS=,; echo "${thrift_list[*]}")
if ! nsx env PYTHONPATH="$here" "$python" - "$switch_param" "$p4info" "$json" <<'EOF'
import sys, time
from fs_p4rt import Switch
switches, p4info, json = sys.argv[1:]
for dev, item in enumerate(switches.split(",")):
    name, addr = item.split("=")
    deadline = time.time() + 30
    while True:
        try:
            s = Switch(name, addr, dev, p4info, json)
            s.connect(timeout=2)
            break
        except Exception as e:
            if time.time() > deadline:
                sys.exit("%s: P4Runtime server not ready: %s" % (name, e))
            time.sleep(0.3)
    s.set_pipeline()
    s.disconnect()
print("pipeline pushed to", switches)
EOF
then
  echo "ptf-tests: BMv2 did not start or rejected the pipeline; switch logs:" >&2
  tail -n 20 "$work"/*.log >&2
  echo "ptf: 0 passed, 1 failed"
  exit 1
fi

test_params="switches='$switch_param';thrift='$thrift_param';p4info='$p4info';bmv2_json='$json';cli='$cli'"
nsx "$python" "$ptf" \
    --test-dir "$here" "${ptf_ifs[@]}" --test-params "$test_params" \
    --log-file "$work/ptf.log" --default-timeout 2 --default-negative-timeout 0.3 \
    "$@" 2>&1 | tee "$work/ptf.out"
ptf_rc=${PIPESTATUS[0]}

# unittest's own summary: "Ran N tests" and "OK (skipped=S)" or
# "FAILED (failures=F, errors=E, skipped=S)".
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$work/ptf.out" | tail -1)
result=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$work/ptf.out" | tail -1)
count() { echo "$result" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
failures=$(count failures); errors=$(count errors); skipped=$(count skipped)
ran=${ran:-0}; failures=${failures:-0}; errors=${errors:-0}; skipped=${skipped:-0}
failed=$((failures + errors))
passed=$((ran - failed - skipped))
if [ "$ptf_rc" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi   # ptf itself failed
if [ -z "$result" ] && [ "$failed" = 0 ]; then failed=1; fi      # no summary at all
[ "$skipped" != 0 ] && echo "ptf: $skipped skipped"
echo "ptf: $passed passed, $failed failed"
[ "$failed" = 0 ]
