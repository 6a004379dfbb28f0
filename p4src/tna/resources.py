#!/usr/bin/env python3
"""Write p4src/tna/RESOURCES.md from a Tofino compile's context.json.

    resources.py OUT_DIR

OUT_DIR is p4c's output directory (pipe/context.json inside) of a compile
the assembler accepted. The summary is what the compiler allocated: stages
per gress, PHV containers, and per table its stages and SRAM/TCAM blocks.
Nothing here depends on the
run (no dates, no timings), so the file changes only when the allocation
does, and `compile.sh --check --tna` can compare it.
"""

import json
import sys
from collections import defaultdict
from pathlib import Path

# Tofino 1, per pipe: 12 MAU stages (each shared by ingress and egress),
# 80 SRAM and 24 TCAM blocks per stage, 224 normal PHV containers
# (64 x 32 b, 64 x 8 b, 96 x 16 b) plus 112 tagalong.
STAGES = 12
SRAM_PER_STAGE = 80
TCAM_PER_STAGE = 24
PHV_NORMAL = 224


def blocks(stage_table):
    """(memory type, blocks) of one stage table and what hangs off it."""
    out = defaultdict(int)
    todo = [stage_table]
    while todo:
        st = todo.pop()
        mem = st.get("memory_resource_allocation")
        if mem:
            n = sum(len(u.get("memory_units", [])) for u in mem.get("memory_units_and_vpns", []))
            out[mem["memory_type"]] += n
        for key in ("ternary_indirection_stage_table", "stage_table"):
            if isinstance(st.get(key), dict):
                todo.append(st[key])
        todo.extend(w for w in st.get("ways", []) if isinstance(w, dict))
    return out


def main():
    out_dir = Path(sys.argv[1])
    context = json.loads((out_dir / "pipe" / "context.json").read_text())

    rows = []
    last_stage = defaultdict(lambda: -1)
    sram = tcam = 0
    for table in context.get("tables", []):
        stage_tables = table.get("match_attributes", {}).get("stage_tables", [])
        if not stage_tables:
            continue
        gress = table.get("direction", "?")
        stages = sorted({st["stage_number"] for st in stage_tables if st["stage_number"] >= 0})
        if not stages:
            continue
        mem = defaultdict(int)
        for st in stage_tables:
            for kind, n in blocks(st).items():
                mem[kind] += n
        sram += mem.get("sram", 0)
        tcam += mem.get("tcam", 0)
        last_stage[gress] = max(last_stage[gress], stages[-1])
        if table["name"].startswith(("tbl_", "cond-")) or "$" in table["name"]:
            continue  # compiler-made tables for straight-line code
        rows.append((gress, stages[0], table["name"], stages, mem, table.get("size", 0)))

    phv = {}
    for gress in ("ingress", "egress"):
        used = set()
        for stage in context.get("phv_allocation", []):
            used.update(c["phv_number"] for c in stage.get(gress, []) if c.get("container_type") == "normal")
        phv[gress] = len(used)

    lines = ["# Tofino resources of tna/foresight.p4", ""]
    lines.append("Written by `p4src/compile.sh --tna` from the compiler's `context.json` "
                 "(p4c's open-source Tofino backend, Tofino 1); do not edit.")
    lines.append("")
    lines.append(f"**Fits Tofino 1:** ingress {last_stage['ingress'] + 1} and egress "
                 f"{last_stage['egress'] + 1} of {STAGES} stages; the assembler wrote `tofino.bin`.")
    lines.append("")
    lines.append("| Gress | Stages used (of 12) | PHV containers (normal, of 224) |")
    lines.append("|---|---:|---:|")
    for gress in ("ingress", "egress"):
        lines.append(f"| {gress} | {last_stage[gress] + 1} | {phv[gress]} "
                     f"({100 * phv[gress] / PHV_NORMAL:.0f} %) |")
    lines.append("")
    lines.append(f"Memory, both gresses: {sram} SRAM blocks of {STAGES * SRAM_PER_STAGE} "
                 f"({100 * sram / (STAGES * SRAM_PER_STAGE):.0f} %), {tcam} TCAM blocks of "
                 f"{STAGES * TCAM_PER_STAGE} ({100 * tcam / (STAGES * TCAM_PER_STAGE):.0f} %).")
    lines.append("")
    lines.append("| Table | Gress | Stages | Entries | SRAM blocks | TCAM blocks |")
    lines.append("|---|---|---|---:|---:|---:|")
    for gress, _, name, stages, mem, size in sorted(rows):
        st = ", ".join(str(s) for s in stages)
        lines.append(f"| `{name}` | {gress} | {st} | {size} | {mem.get('sram', 0)} | {mem.get('tcam', 0)} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
