#!/usr/bin/env bash
# Compile Foresight's P4 programs: the v1model programs for BMv2 and the TNA
# program for Tofino.
#
#   p4src/compile.sh [--bmv2|--tna]          write p4src/build/<program>.{json,p4info.txtpb,p4info.binpb}
#                                            and p4src/build/tna/ + p4src/tna/RESOURCES.md
#   p4src/compile.sh --check [--bmv2|--tna]  compile into a temporary directory and fail if the
#                                            committed artifacts differ (stale) or p4c warns
# Without --bmv2/--tna both are built; a target whose compiler is missing is
# an error when asked for explicitly and skipped (with the reason) otherwise.
#
# BMv2: p4c on PATH, or in $FORESIGHT_P4_PREFIX/bin (default /opt/p4tools);
# failing those, the Tofino-enabled p4c below, whose BMv2 backend is the
# same (the target is always given explicitly).
# Tofino: the p4c built with p4c's Tofino backend, in its own prefix
# $FORESIGHT_TOFINO_PREFIX (default /opt/p4c-tofino), since a Tofino-enabled
# p4c changes the driver's default target.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${FORESIGHT_P4_PREFIX:-/opt/p4tools}
tofino_prefix=${FORESIGHT_TOFINO_PREFIX:-/opt/p4c-tofino}
[ -d "$prefix/bin" ] && PATH="$prefix/bin:$PATH"

mode=write; want=all
for arg in "$@"; do
  case "$arg" in
    --check) mode=check ;;
    --bmv2) want=bmv2 ;;
    --tna) want=tna ;;
    *) echo "usage: $0 [--check] [--bmv2|--tna]" >&2; exit 2 ;;
  esac
done

tofino_p4c=
[ -x "$tofino_prefix/bin/p4c" ] && [ -x "$tofino_prefix/bin/p4c-barefoot" ] && tofino_p4c="$tofino_prefix/bin/p4c"
bmv2_p4c=$(command -v p4c || true)
[ -z "$bmv2_p4c" ] && [ -x "$tofino_prefix/bin/p4c" ] && bmv2_p4c="$tofino_prefix/bin/p4c"

status=0
if [ "$want" != tna ]; then
  if [ -z "$bmv2_p4c" ]; then
    echo "p4c not found (PATH, $prefix/bin or $tofino_prefix/bin)" >&2; exit 2
  fi
  "$here/v1model/compile.sh" "$mode" "$bmv2_p4c" || status=1
fi
if [ "$want" != bmv2 ]; then
  if [ -n "$tofino_p4c" ]; then
    "$here/tna/compile.sh" "$mode" "$tofino_p4c" || status=1
  elif [ "$want" = tna ]; then
    echo "the Tofino p4c (p4c + p4c-barefoot) not found in $tofino_prefix/bin" >&2; exit 2
  else
    echo "SKIPPED TNA build: the Tofino p4c (p4c + p4c-barefoot) not found in $tofino_prefix/bin"
  fi
fi
exit $status
