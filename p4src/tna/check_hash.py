#!/usr/bin/env python3
"""Check the compiled TNA ECMP hashes are the BMv2 program's, bit for bit.

    check_hash.py OUT_DIR BMV2_JSON

Reads the hash configuration the Tofino compiler wrote (OUT_DIR/pipe/
context.json, `dynamic_hash_calculations`) and checks, for both ECMP hashes
(QP-aware and 5-tuple): the algorithm is CRC-32 with zlib's parameters
(polynomial 0x04C11DB7, reflected, init and final XOR 0xFFFFFFFF; checked by
computing it from those parameters and comparing with zlib.crc32), and the
input fields, in order, have the widths of the v1model program's crc32
inputs in the BMv2 JSON. Exit status 1 and a message naming the difference
otherwise.
"""

import json
import os
import sys
import zlib

WANT = {"qp_aware_hash", "five_tuple_hash"}


def crc(data, poly, init, xor_out, reflect, width=32):
    """CRC from its parameters (reflected input and output when `reflect`)."""
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    reg = init
    for byte in data:
        if reflect:
            byte = int(f"{byte:08b}"[::-1], 2)
        reg ^= byte << (width - 8)
        for _ in range(8):
            reg = ((reg << 1) ^ poly) & mask if reg & top else (reg << 1) & mask
    if reflect:
        reg = int(f"{reg:0{width}b}"[::-1], 2)
    return reg ^ xor_out


def bmv2_widths(bmv2):
    """Width sequences of the v1model program's crc32 calculations."""
    widths = {}
    for ht in bmv2["header_types"]:
        for f in ht["fields"]:
            widths[(ht["name"], f[0])] = f[1]
    instance_type = {h["name"]: h["header_type"] for h in bmv2["headers"]}
    out = []
    for calc in bmv2["calculations"]:
        if calc["algo"] != "crc32":
            continue
        seq = []
        for inp in calc["input"]:
            header, field = inp["value"]
            seq.append(widths[(instance_type[header], field)])
        out.append(tuple(seq))
    return sorted(out)


def main():
    out_dir, bmv2_json = sys.argv[1], sys.argv[2]
    context = json.load(open(os.path.join(out_dir, "pipe", "context.json")))
    bmv2 = json.load(open(bmv2_json))
    errors = []
    tna = []
    for calc in context.get("dynamic_hash_calculations", []):
        name = calc["name"].split(".")
        if not WANT.intersection(name):
            continue
        algo = next(a for a in calc["algorithms"] if a.get("is_default"))
        poly = int(algo["poly"], 16) & 0xFFFFFFFF
        init, xor_out = int(algo["init"], 16), int(algo["final_xor"], 16)
        sample = bytes(range(37))
        if algo["type"] != "crc" or algo.get("msb") or not algo.get("reverse") or \
                crc(sample, poly, init, xor_out, True) != zlib.crc32(sample):
            errors.append(f"{calc['name']}: algorithm {algo} is not zlib's CRC-32")
        fields = calc["field_lists"][0]["fields"]
        tna.append(tuple(f["bit_width"] for f in fields))
    if len(tna) != len(WANT):
        errors.append(f"found {len(tna)} of the ECMP hashes {sorted(WANT)} in context.json")
    if sorted(tna) != bmv2_widths(bmv2):
        errors.append(f"hash inputs differ: TNA {sorted(tna)}, BMv2 {bmv2_widths(bmv2)}")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)
    print(f"TNA ECMP hashes are zlib CRC-32 over the BMv2 inputs {sorted(tna)}")


if __name__ == "__main__":
    main()
