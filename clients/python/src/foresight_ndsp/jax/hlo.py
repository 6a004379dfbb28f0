"""Collectives of a compiled XLA program, read from its HLO text.

`Compiled.as_text()` of a jitted JAX function is the optimised, *scheduled*
HLO module (`is_scheduled=true`): instructions of each computation appear in
execution order. This module lists the collective instructions in that
order, with the bytes they move and who takes part; it needs nothing but
the text (no JAX), so it is testable on any HLO.

Participants are indices into the executable's device assignment: with
`use_global_device_ids=true` (SPMD, the jit/shard_map case) or in plain
cross-replica mode (pmap) a replica-group entry is the position of a device
in the assignment. An empty `replica_groups={}` means every device.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

# Opcodes that move data between devices. Async pairs count at their start.
COLLECTIVE_OPS = {
    "all-reduce": "all-reduce",
    "all-reduce-start": "all-reduce",
    "all-gather": "all-gather",
    "all-gather-start": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-to-all": "all-to-all",
    "collective-permute": "collective-permute",
    "collective-permute-start": "collective-permute",
}

_ELEMENT_BITS = {
    "pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16,
    "s32": 32, "u32": 32, "s64": 64, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128, "token": 0,
}
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
_COMP_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_COMMENT = re.compile(r"/\*.*?\*/")  # e.g. /*index=5*/ inside long operand lists
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


class HloParseError(ValueError):
    """The text is not HLO this reader understands; the message says where."""


@dataclass(frozen=True)
class HloCollective:
    """One collective instruction, in schedule order.

    `operand_bytes`: bytes of the input on each participant;
    `result_bytes`: bytes of the output on each participant;
    `groups`: participant groups (device-assignment indices), each group runs
    its own collective; `pairs`: (source, target) for collective-permute;
    `repeat`: how many times it runs per program execution (loop trip
    count; None when a loop's count is not known at compile time).
    """

    order: int
    name: str
    op: str
    operand_bytes: int
    result_bytes: int
    groups: Tuple[Tuple[int, ...], ...]
    pairs: Tuple[Tuple[int, int], ...]
    computation: str
    repeat: Optional[int]
    op_name: str


def element_bits(dtype: str) -> int:
    if dtype in _ELEMENT_BITS:
        return _ELEMENT_BITS[dtype]
    if dtype.startswith("f8") or dtype.startswith("f4") or dtype.startswith("f6"):
        return int(dtype[1])
    raise HloParseError(f"unknown element type {dtype!r}")


def shape_bytes(shape: str) -> int:
    """Bytes of an HLO shape: an array `f32[64,128]{1,0}` or a tuple of them."""
    total_bits = 0
    for dtype, dims in _ARRAY.findall(shape):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total_bits += n * element_bits(dtype)
    return (total_bits + 7) // 8


def _balanced(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket that closes the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    raise HloParseError(f"unbalanced {open_ch}{close_ch} in: {text[:120]}")


def _split_top(text: str) -> List[str]:
    """Split on commas that are not inside brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


@dataclass
class _Instr:
    name: str
    shape: str
    opcode: str
    operands: List[str]
    attrs: Dict[str, str]


def _parse_instr(line: str) -> Optional[_Instr]:
    m = _INSTR.match(_COMMENT.sub("", line))
    if not m:
        return None
    name, rest = m.group(1), m.group(2)
    if rest.startswith("("):
        end = _balanced(rest, 0, "(", ")")
    else:
        end = rest.index(" ") if " " in rest else len(rest)
    shape, rest = rest[:end], rest[end:].lstrip()
    om = re.match(r"([a-z][a-z0-9\-]*)\(", rest)
    if not om:
        return None
    opcode = om.group(1)
    close = _balanced(rest, om.end() - 1, "(", ")")
    operands = [o.split()[-1].lstrip("%") for o in _split_top(rest[om.end():close - 1]) if o]
    attrs = {}
    for part in _split_top(rest[close:].lstrip(", ")):
        if "=" in part:
            k, v = part.split("=", 1)
            attrs[k.strip()] = v.strip()
    return _Instr(name, shape, opcode, operands, attrs)


def _parse_module(text: str) -> Tuple[Dict[str, List[_Instr]], str]:
    comps: Dict[str, List[_Instr]] = {}
    entry, current = None, None
    for line in text.splitlines():
        if current is None:
            h = _COMP_HEADER.match(line.strip())
            if h:
                current = h.group(2)
                comps[current] = []
                if h.group(1):
                    entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        instr = _parse_instr(line)
        if instr is not None:
            comps[current].append(instr)
    if entry is None:
        raise HloParseError("no ENTRY computation found: is this the text of a compiled HLO module?")
    return comps, entry


def parse_groups(value: Optional[str], num_devices: int) -> Tuple[Tuple[int, ...], ...]:
    """replica_groups in either syntax: {{0,1},{2,3}} or iota [G,S]<=[dims]T(perm)."""
    if value is None or value.replace(" ", "") in ("{}", "{{}}"):
        return (tuple(range(num_devices)),)
    v = value.replace(" ", "")
    if v.startswith("{"):
        return tuple(tuple(int(x) for x in g.split(",") if x) for g in re.findall(r"\{([0-9,]*)\}", v[1:-1]))
    m = re.fullmatch(r"\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", v)
    if not m:
        raise HloParseError(f"replica_groups={value}: neither a list of groups nor an iota list")
    g, s = (int(x) for x in m.group(1).split(","))
    dims = [int(x) for x in m.group(2).split(",")]
    perm = [int(x) for x in m.group(3).split(",")] if m.group(3) else list(range(len(dims)))
    ids = _iota_transposed(dims, perm)
    if len(ids) != g * s:
        raise HloParseError(f"replica_groups={value}: {g}x{s} groups but {len(ids)} ids")
    return tuple(tuple(ids[i * s:(i + 1) * s]) for i in range(g))


def _iota_transposed(dims: Sequence[int], perm: Sequence[int]) -> List[int]:
    """Row-major ids 0..prod(dims)-1 laid out in `dims`, read in axis order `perm`."""
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    out_dims = [dims[p] for p in perm]
    out: List[int] = []

    def walk(axis: int, base: int) -> None:
        if axis == len(out_dims):
            out.append(base)
            return
        for k in range(out_dims[axis]):
            walk(axis + 1, base + k * strides[perm[axis]])

    walk(0, 0)
    return out


def _pairs(value: Optional[str]) -> Tuple[Tuple[int, int], ...]:
    if not value:
        return ()
    return tuple((int(a), int(b)) for a, b in re.findall(r"\{(\d+),(\d+)\}", value))


def _trip_count(attrs: Dict[str, str]) -> Optional[int]:
    cfg = attrs.get("backend_config")
    if not cfg:
        return None
    try:
        n = json.loads(cfg).get("known_trip_count", {}).get("n")
    except ValueError:
        m = re.search(r'"known_trip_count":\{"n":"(\d+)"', cfg)
        n = m.group(1) if m else None
    return int(n) if n is not None else None


def _result_from_operand(op: str, operand: int, groups) -> int:
    n = len(groups[0]) if groups else 1
    if op == "all-gather":
        return operand * n
    if op == "reduce-scatter":
        return operand // n
    return operand


def read_collectives(text: str, num_devices: int) -> List[HloCollective]:
    """Every collective of the module, in execution order, loops and calls followed."""
    comps, entry = _parse_module(text)
    out: List[HloCollective] = []

    def visit(comp: str, repeat: Optional[int], seen: Tuple[str, ...]) -> None:
        if comp in seen:
            raise HloParseError(f"computation {comp} calls itself")
        shapes = {i.name: i.shape for i in comps.get(comp, [])}
        for ins in comps.get(comp, []):
            if ins.opcode in COLLECTIVE_OPS:
                op = COLLECTIVE_OPS[ins.opcode]
                result = shape_bytes(ins.shape)
                groups = () if op == "collective-permute" else parse_groups(ins.attrs.get("replica_groups"), num_devices)
                missing = [o for o in ins.operands if o not in shapes]
                if missing:
                    raise HloParseError(f"{comp}/{ins.name}: operand {missing[0]} is not defined before its use")
                operand = sum(shape_bytes(shapes[o]) for o in ins.operands)
                if ins.opcode.endswith("-start"):
                    # An async start's shape also holds operand buffers and
                    # contexts; the result follows from the operand.
                    result = _result_from_operand(op, operand, groups)
                m = re.search(r'op_name="([^"]*)"', ins.attrs.get("metadata", ""))
                out.append(HloCollective(
                    order=len(out), name=ins.name, op=op,
                    operand_bytes=operand, result_bytes=result, groups=groups,
                    pairs=_pairs(ins.attrs.get("source_target_pairs")),
                    computation=comp, repeat=repeat, op_name=m.group(1) if m else "",
                ))
            elif ins.opcode == "while":
                body = ins.attrs.get("body", "").lstrip("%")
                n = _trip_count(ins.attrs)
                visit(body, None if repeat is None or n is None else repeat * n, seen + (comp,))
            elif ins.opcode in ("call", "async-start"):
                target = (ins.attrs.get("to_apply") or ins.attrs.get("calls") or "").lstrip("%")
                if target:
                    visit(target, repeat, seen + (comp,))
            elif ins.opcode == "conditional":
                branches = ins.attrs.get("branch_computations", "")
                for b in re.findall(r"%?([\w.\-]+)", branches.strip("{}")):
                    visit(b, None, seen + (comp,))  # which branch runs is not known

    visit(entry, 1, ())
    return out
