#!/usr/bin/env python3
"""Check the TNA program's decision tables against the v1model logic.

    check_decisions.py

Where the v1model program (v1model/*.p4) decides with if-else chains, the
TNA program (tna/*.p4) decides with small hidden tables of constant
entries in priority order, because on Tofino every link of a chain costs a
stage. Nothing can run the TNA program here (no Tofino, no model), so this
reads those tables' constant entries from the P4 source, evaluates them as
the hardware does (first matching entry, value &&& mask), and compares
every outcome with the v1model conditions written out below, over the
interesting values of every key and a large seeded random sample. It also
checks the lookup tables that stand in for arithmetic (INT hop sizes, sink
strip lengths, report lengths) against the v1model formulas.

Needs no compiler; exits non-zero naming the first disagreement.
"""

import itertools
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
P4SRC = HERE.parent
SOURCES = [P4SRC / "shared" / "formats.p4", HERE / "sizes.p4"] + sorted(
    p for p in HERE.glob("*.p4") if p.name not in ("sizes.p4", "foresight.p4"))


def constants():
    """Every `const bit<N> NAME = VALUE;` and numeric #define of the sources."""
    out = {}
    for path in SOURCES:
        text = path.read_text()
        for name, value in re.findall(r"const\s+bit<\d+>\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", text):
            out[name] = int(value, 0)
        for name, value in re.findall(r"^#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\s*$", text, re.M):
            out[name] = int(value, 0)
    return out


CONST = constants()


def value(token):
    token = token.strip()
    if token in ("true", "false"):
        return int(token == "true")
    if token in CONST:
        return CONST[token]
    return int(token, 0)


def parse_key(token):
    """One entry key element: None (wildcard) or (value, mask or None)."""
    token = token.strip()
    if token == "_":
        return None
    if "&&&" in token:
        v, m = token.split("&&&")
        return (value(v), value(m))
    return (value(token), None)


def table(path, name):
    """[(keys, action, args)] of a table's constant entries, in priority order."""
    text = re.sub(r"//[^\n]*", "", path.read_text())
    start = re.search(r"\btable\s+" + re.escape(name) + r"\s*\{", text)
    if not start:
        sys.exit(f"{path.name}: no table {name}")
    body = text[start.end():]
    entries = re.search(r"const\s+entries\s*=\s*\{(.*?)\n\s*\}", body, re.S)
    if not entries:
        sys.exit(f"{path.name}: table {name} has no const entries")
    out = []
    for raw in entries.group(1).split(";"):
        raw = " ".join(raw.split())
        if not raw:
            continue
        m = re.fullmatch(r"(\(.*\)|[^:]+)\s*:\s*(\w+)\((.*)\)", raw)
        if not m:
            sys.exit(f"{path.name}: cannot read entry '{raw}' of {name}")
        keys = m.group(1).strip()
        keys = keys[1:-1].split(",") if keys.startswith("(") else [keys]
        args = [value(a) for a in m.group(3).split(",") if a.strip()]
        out.append(([parse_key(k) for k in keys], m.group(2), tuple(args)))
    return out


def lookup(entries, inputs, default):
    for keys, action, args in entries:
        if len(keys) != len(inputs):
            sys.exit(f"entry {keys} has {len(keys)} keys, the table {len(inputs)}")
        if all(k is None or (x & k[1] if k[1] is not None else x) ==
               (k[0] & k[1] if k[1] is not None else k[0])
               for k, x in zip(keys, inputs)):
            return (action, *args)
    return default


def compare(name, entries, reference, inputs_iter, default):
    n = 0
    for inputs in inputs_iter:
        got = lookup(entries, inputs, default)
        want = reference(*inputs)
        if got != want:
            sys.exit(f"{name}: for keys {inputs} the TNA table gives {got}, v1model {want}")
        n += 1
    return n


def cases(choices, sample, seed):
    """Every combination of the choices if few, else a seeded random sample."""
    total = 1
    for c in choices:
        total *= len(c)
    if total <= sample:
        return itertools.product(*choices)
    rng = random.Random(seed)
    return (tuple(rng.choice(c) for c in choices) for _ in range(sample))


C = CONST
FS = C["INT_DOMAIN_FORESIGHT"]
TX = C["INT_DS_INS_TX_BYTES"]
MAX_LEN = C["FS_TNA_INT_MAX_LEN"]


def ref_int_role(report, int_md, too_deep, sink, checksum, bitmap, domain, ds,
                 udp, b_source, b_max_hop, b_ds, r_source, r_max_hop, r_ds):
    """v1model/int.p4's source / transit / sink conditions."""
    if int_md:
        if report == 0 and sink == 1:
            return ("role_sink_too_deep",) if too_deep else ("role_sink",)
        if checksum == 0 and bitmap & 0x007F == 0:
            if ds == 0:
                return ("role_transit", 0)
            if domain == FS and ds == TX:
                return ("role_transit", 1)
        return ("role_pass",)
    if udp and checksum == 0:
        if report == 1 and r_source == 1 and r_max_hop != 0:
            return ("role_report_source", int(r_ds & TX != 0))
        if report == 0 and b_source == 1 and sink == 0 and b_max_hop != 0:
            return ("role_source", int(b_ds & TX != 0))
    return ("role_pass",)


def ref_mark(ecn, hit, kmax_slack, kmin_slack, under_pmax, p_hit, probability, under_p):
    """v1model/ecn.p4: queue marking first, then pre-drain, ECT packets only."""
    if ecn in (C["ECN_NOT_ECT"], C["ECN_CE"]):
        return ("no_mark",)
    if hit and (kmax_slack == 0 or (kmin_slack == 0 and under_pmax != 0)):
        return ("mark_queue",)
    if p_hit and (probability == 0xFFFF or under_p != 0):
        return ("mark_predrain",)
    return ("no_mark",)


def ref_hop_action(role, ml_match, hops_left, len_after, head_over, hop_over):
    """What the hop does: push, set E or M, strip, drop, or nothing. A source
    whose headers would pass the MTU does not insert them (v1model decides
    before inserting, TNA takes them out again); a hop whose metadata would
    pass it sets M, but running out of hops (E) comes first."""
    if role == C["FS_INT_SOURCE"]:
        if head_over:
            return ("unsource",)
        return ("mtu_exceeded",) if hop_over else ("push_hop",)
    if role == C["FS_INT_TRANSIT"] and ml_match:
        if hops_left == 0:
            return ("exceed_hop",)
        if hop_over:
            return ("mtu_exceeded",)
        return ("push_hop",) if len_after <= MAX_LEN else ("exceed_hop",)
    if role == C["FS_INT_SINK"]:
        return ("strip_int",)
    if role == C["FS_INT_SINK_TOO_DEEP"]:
        return ("drop_too_deep",)
    return ("leave_int",)


def ref_report_outcome(report, configured, int_md, sized):
    if report == 0:
        return ("not_a_report",)
    if configured == 0 or not int_md:
        return ("report_unconfigured",)
    if sized == 0:
        return ("report_too_long",)
    return ("report_send",)


def ref_first_failed(partial, parser_other, parse_drop, ipv4, ipv4_short, udp_short,
                     tcp_short, int_invalid, checksum, udp_past_ipv4):
    """v1model/validation.p4's order of checks."""
    for flag, reason in ((partial, "DROP_TRUNCATED"), (parser_other, "DROP_PARSER_OTHER")):
        if flag:
            return ("set_reason", C[reason])
    if parse_drop:
        return ("use_parse_drop",)
    for flag, reason in ((not ipv4, "DROP_NOT_IPV4"), (ipv4_short, "DROP_IPV4_INVALID"),
                         (udp_short, "DROP_L4_INVALID"), (tcp_short, "DROP_L4_INVALID"),
                         (int_invalid, "DROP_INT_INVALID"), (checksum, "DROP_IPV4_CHECKSUM"),
                         (udp_past_ipv4, "DROP_L4_INVALID")):
        if flag:
            return ("set_reason", C[reason])
    return ("NoAction",)


def hop_words(bitmap, ds_words):
    """v1model/int.p4's int_hop_words(): words per instruction bit 0..8."""
    per_bit = {0x8000: 1, 0x4000: 1, 0x2000: 1, 0x1000: 1, 0x0800: 2, 0x0400: 2,
               0x0200: 2, 0x0100: 1, 0x0080: 1}
    return sum(w for bit, w in per_bit.items() if bitmap & bit) + ds_words


def check_lookups(int_p4):
    a = {(k[0][0], k[1][0]): args for k, _, args in table(int_p4, "hop_size_a_table")}
    b = {(k[0][0], k[1][0]): args for k, _, args in table(int_p4, "hop_size_b_table")}
    for ins in range(0, 0x10000, 0x80):   # bits 9..15 are never set here
        for ds in (0, 1):
            aw, ab = a[(ins >> 12, (ins >> 7) & 1)]
            bw, bb = b[((ins >> 8) & 0xF, ds)]
            want = hop_words(ins, ds)
            if (aw + bw, ab + bb) != (want, 4 * want):
                sys.exit(f"hop size of bitmap {ins:#06x} ds {ds}: {aw + bw} words / "
                         f"{ab + bb} bytes, v1model {want} / {4 * want}")
    for keys, _, (nbytes, delta) in table(int_p4, "int_strip_bytes"):
        length = keys[0][0]
        if nbytes != 4 * (length + 1) or delta != (-18 - nbytes) & 0xFFFF:
            sys.exit(f"strip bytes for len {length}: {nbytes}, {delta:#x}")
    for keys, _, (n,) in table(int_p4, "int_len_after"):
        if keys[0][0] != n:
            sys.exit(f"int_len_after adds {n} for hop_ml {keys[0][0]}")
    for keys, _, _ in table(int_p4, "hop_ml_check"):
        if keys[0][0] != keys[1][0]:
            sys.exit(f"hop_ml_check matches {keys[0][0]} with {keys[1][0]}")
    sizes = table(int_p4, "report_sizes")
    for length in range(256):
        for port in (C["UDP_PORT_ROCEV2"], 4790, 0):
            got = lookup(sizes, (length, port), None)
            if not 3 <= length <= MAX_LEN:
                if got is not None:
                    sys.exit(f"report_sizes knows len {length}, which a TNA sink never parses")
                continue
            inner = 32 + 4 * length + (12 if port == C["UDP_PORT_ROCEV2"] else 0)
            want = ("report_size", 2 + inner // 4, 28 + inner, 48 + inner)
            if got != want:
                sys.exit(f"report_sizes for len {length} port {port}: {got}, v1model {want}")


def main():
    int_p4, ecn, validation = HERE / "int.p4", HERE / "ecn.p4", HERE / "validation.p4"
    b = (0, 1)
    counts = {}
    counts["int_egress.int_role"] = compare(
        "int_role", table(int_p4, "int_role"), ref_int_role,
        cases([b, b, b, b, (0, 1, 0xFFFF), (0, 0xFF80, 0x8000, 0x0001, 0x0040, 0xDC80, 0x1234),
               (FS, 0, 0x4654), (0, TX, 0x4000, TX | 1), b, b, (0, 1, 8, 255),
               (0, TX, 0x4000, 0xFFFF), b, (0, 1, 255), (0, TX, 0x7FFF)], 400_000, 1),
        ("role_pass",))
    counts["ecn.mark"] = compare(
        "mark", table(ecn, "mark"), ref_mark,
        cases([(0, 1, 2, 3), b, (0, 1, 0x7FFFF), (0, 1, 0x7FFFF), (0, 1, 0xFFFF), b,
               (0, 1, 0x8000, 0xFFFE, 0xFFFF), (0, 1, 0xFFFF)], 400_000, 2),
        ("no_mark",))
    counts["int_egress.int_hop_action"] = compare(
        "int_hop_action", table(int_p4, "int_hop_action"), ref_hop_action,
        cases([range(8), b, (0, 1, 2, 255), range(256), (0, 1, 16, 0xFFFF),
               (0, 1, 4, 0x8000, 0xFFFF)], 400_000, 3),
        ("leave_int",))
    counts["int_egress.report_outcome"] = compare(
        "report_outcome", table(int_p4, "report_outcome"), ref_report_outcome,
        cases([b, b, b, b], 400_000, 4), ("not_a_report",))
    counts["validation.first_failed"] = compare(
        "first_failed", table(validation, "first_failed"), ref_first_failed,
        cases([b] * 10, 400_000, 5), ("NoAction",))
    check_lookups(int_p4)
    print("TNA decision tables agree with the v1model logic: " +
          ", ".join(f"{name} {n} cases" for name, n in counts.items()) +
          "; INT hop sizes, strip and report lengths match the v1model formulas")


if __name__ == "__main__":
    main()
