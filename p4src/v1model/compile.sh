#!/usr/bin/env bash
# The v1model programs for BMv2 (called by p4src/compile.sh):
#   v1model/compile.sh write|check P4C
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)   # p4src/
mode=$1; p4c=$2

# program name -> top-level source, relative to p4src/
programs=(
  "ipv4_forward:examples/ipv4_forward.p4"
  "p4rt_features:examples/p4rt_features.p4"
)
programs+=("foresight:v1model/foresight.p4")

out="$here/build"
if [ "$mode" = check ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi

# Artifacts are the same if byte-identical, or, for the BMv2 JSON, equal
# once source locations are set aside: those name p4c's own include
# directory, which differs between installs.
same() {
  cmp -s "$1" "$2" && return 0
  case "$1" in
    *.json) python3 - "$1" "$2" <<'PY'
import json, sys
def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "source_info"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node
a, b = (strip(json.load(open(p))) for p in sys.argv[1:3])
sys.exit(0 if a == b else 1)
PY
      ;;
    *) return 1 ;;
  esac
}

status=0
for entry in "${programs[@]}"; do
  name=${entry%%:*}; src=${entry#*:}
  log="$out/$name.p4c.log"
  # Relative paths from p4src/, so the JSON's source references do not
  # depend on where the repository is checked out.
  if ! (cd "$here" && "$p4c" --target bmv2 --arch v1model --std p4-16 \
      -o "$out" --p4runtime-files "$out/$name.p4info.txtpb,$out/$name.p4info.bin" \
      "$src") >"$log" 2>&1; then
    cat "$log" >&2; echo "p4c failed on $src" >&2; exit 1
  fi
  # p4c names the JSON after the source file; keep the program name instead.
  # p4c 1.2.4.x does not recognise the .binpb suffix: write .bin, rename. Drop the preprocessed .p4i.
  base=$(basename "$src" .p4)
  [ "$base" != "$name" ] && mv "$out/$base.json" "$out/$name.json"
  mv "$out/$name.p4info.bin" "$out/$name.p4info.binpb"
  rm -f "$out/$base.p4i"
  # The JSON names p4c's temporary preprocessed file; name the source instead.
  sed -i "s|\"program\" : \"[^\"]*\"|\"program\" : \"$src\"|" "$out/$name.json"
  # One warning is inherent and harmless: p4c's BMv2 backend cannot give a
  # table with an action profile (ECMP selector) a default action, and says
  # so for every such table; a miss there simply drops. Any other warning fails.
  known='Target does not support default_action for .* (due to action profiles)'
  if grep -v -e "$known" "$log" | grep -qi "warning"; then cat "$log" >&2; echo "p4c warned on $src" >&2; status=1; fi
  rm -f "$log"
  if [ "$mode" = check ]; then
    for ext in json p4info.txtpb p4info.binpb; do
      if ! same "$out/$name.$ext" "$here/build/$name.$ext"; then
        echo "stale: p4src/build/$name.$ext differs from what p4c produces; run p4src/compile.sh and commit" >&2
        status=1
      fi
    done
  fi
done
[ "$mode" = check ] && [ $status = 0 ] && echo "P4 artifacts up to date (${#programs[@]} programs)"
exit $status
