#!/usr/bin/env bash
# The TNA program for Tofino (called by p4src/compile.sh --tna):
#   tna/compile.sh write|check P4C
#
# P4C is the p4c driver of a Tofino-enabled p4c build. Committed artifacts
# (p4src/build/tna/): the standard P4Info (--p4runtime-force-std-externs, the
# one the controller reads) and bfrt.json; p4src/tna/RESOURCES.md is the
# compiler's resource summary. The binary pipeline (tofino.bin,
# context.json) is not committed: `write` leaves it in
# p4src/build/tna/out/ (ignored by git), where `foresight switch push
# --target tofino` and `foresight controller --target tofino` read it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
p4src=$(dirname "$here")
mode=$1; p4c=$2

committed="$p4src/build/tna"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
out="$work/out"
log="$work/p4c.log"

start=$(date +%s)
# Any compiler or assembler error fails, including a program that no longer
# fits the chip's stages (the assembler then writes no tofino.bin).
if ! (cd "$p4src" && "$p4c" --target tofino --arch tna --std p4-16 \
    -o "$out" --p4runtime-files "$work/foresight.p4info.txtpb,$work/foresight.p4info.bin" \
    --p4runtime-force-std-externs tna/foresight.p4) >"$log" 2>&1 ||
   [ ! -f "$out/pipe/tofino.bin" ]; then
  cat "$log" >&2; echo "p4c (tofino) failed on tna/foresight.p4" >&2; exit 1
fi
seconds=$(( $(date +%s) - start ))
mv "$work/foresight.p4info.bin" "$work/foresight.p4info.binpb"

status=0
# Warnings the program cannot avoid are explained in p4src/README.md
# ("The TNA build", Warnings); any other fails the build.
known_warnings=(
  "formats.p4([0-9]*): \[--Wwarn=unused\]"
  "\[--Wwarn=uninitialized-out-param\] warning: out parameter 'meta' may be uninitialized"
  "No known conversion to standard P4Info for 'DynHash' extern type"
  "Parser state min_parse_depth_accept_loop will be unrolled"
  "WARNING: All log messages before absl::InitializeLog() is called"
  "[0-9] warnings generated"
  "barefoot.PortMetadata: failed to parse contents"
)
filtered=$(grep -i "warning" "$log" || true)
for k in "${known_warnings[@]}"; do filtered=$(grep -v -e "$k" <<<"$filtered" || true); done
if [ -n "$filtered" ]; then cat "$log" >&2; echo "p4c (tofino) warned on tna/foresight.p4" >&2; status=1; fi

python3 "$here/resources.py" "$out" > "$work/RESOURCES.md"
python3 "$here/check_hash.py" "$out" "$p4src/build/foresight.json" || status=1

if [ "$mode" = check ]; then
  for f in foresight.p4info.txtpb foresight.p4info.binpb bfrt.json; do
    src="$work/$f"; [ "$f" = bfrt.json ] && src="$out/bfrt.json"
    if ! python3 "$here/same_artifact.py" "$src" "$committed/$f"; then
      echo "stale: p4src/build/tna/$f differs from what p4c produces; run p4src/compile.sh --tna and commit" >&2
      status=1
    fi
  done
  if ! python3 "$here/same_artifact.py" "$work/RESOURCES.md" "$here/RESOURCES.md"; then
    echo "stale: p4src/tna/RESOURCES.md differs from the compiler's resource use; run p4src/compile.sh --tna and commit" >&2
    status=1
  fi
  [ $status = 0 ] && echo "TNA artifacts up to date (compiled in ${seconds} s)"
else
  mkdir -p "$committed"
  cp "$work/foresight.p4info.txtpb" "$work/foresight.p4info.binpb" "$committed/"
  cp "$out/bfrt.json" "$committed/bfrt.json"
  cp "$work/RESOURCES.md" "$here/RESOURCES.md"
  rm -rf "$committed/out"; cp -r "$out" "$committed/out"
  echo "TNA build written to p4src/build/tna (compiled in ${seconds} s)"
fi
exit $status
