#!/usr/bin/env bash
# Compile Foresight's P4 programs for BMv2 (v1model) with p4c.
#
#   p4src/compile.sh          write p4src/build/<program>.{json,p4info.txtpb,p4info.binpb}
#   p4src/compile.sh --check  compile into a temporary directory and fail if the
#                             committed artifacts differ (stale) or p4c warns
#
# p4c is found on PATH, or through $FORESIGHT_P4_PREFIX/bin (default /opt/p4tools).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${FORESIGHT_P4_PREFIX:-/opt/p4tools}
[ -d "$prefix/bin" ] && PATH="$prefix/bin:$PATH"
command -v p4c >/dev/null || { echo "p4c not found (PATH or $prefix/bin)" >&2; exit 2; }

# program name -> top-level source, relative to p4src/
programs=(
  "ipv4_forward:examples/ipv4_forward.p4"
  "p4rt_features:examples/p4rt_features.p4"
)
[ -f "$here/foresight.p4" ] && programs+=("foresight:foresight.p4")

mode=write
[ "${1:-}" = "--check" ] && mode=check
out="$here/build"
if [ "$mode" = check ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi

status=0
for entry in "${programs[@]}"; do
  name=${entry%%:*}; src=${entry#*:}
  log="$out/$name.p4c.log"
  if ! p4c --target bmv2 --arch v1model --std p4-16 -I "$here/include" \
      -o "$out" --p4runtime-files "$out/$name.p4info.txtpb,$out/$name.p4info.binpb" \
      "$here/$src" >"$log" 2>&1; then
    cat "$log" >&2; echo "p4c failed on $src" >&2; exit 1
  fi
  # p4c names the JSON after the source file; keep the program name instead.
  base=$(basename "$src" .p4)
  [ "$base" != "$name" ] && mv "$out/$base.json" "$out/$name.json"
  if grep -qi "warning" "$log"; then cat "$log" >&2; echo "p4c warned on $src" >&2; status=1; fi
  rm -f "$log"
  if [ "$mode" = check ]; then
    for ext in json p4info.txtpb p4info.binpb; do
      if ! cmp -s "$out/$name.$ext" "$here/build/$name.$ext"; then
        echo "stale: p4src/build/$name.$ext differs from what p4c produces; run p4src/compile.sh and commit" >&2
        status=1
      fi
    done
  fi
done
[ "$mode" = check ] && [ $status = 0 ] && echo "P4 artifacts up to date (${#programs[@]} programs)"
exit $status
