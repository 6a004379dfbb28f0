"""p4runtime-shell side of the interop test (controller/p4rt/tests/shell_interop.rs).

    shell_interop.py --addr A write   < entries.json   insert entries with p4runtime-shell
    shell_interop.py --addr A read TABLE...            print what p4runtime-shell reads

Entries are JSON: {"table", "match": {field: text}, "action", "params": {name: text},
"priority"}. Read prints the same shape with every value as a decimal integer
(LPM "v/len", ternary "v&&&m", range "lo..hi"), decoded by p4runtime-shell's
own names for tables, fields, actions and parameters.
"""

import argparse
import json
import sys

import p4runtime_sh.shell as sh


def as_int(raw):
    return str(int.from_bytes(raw, "big"))


def match_text(mf):
    kind = mf.WhichOneof("field_match_type")
    if kind == "exact":
        return as_int(mf.exact.value)
    if kind == "optional":
        return as_int(mf.optional.value)
    if kind == "lpm":
        return f"{as_int(mf.lpm.value)}/{mf.lpm.prefix_len}"
    if kind == "ternary":
        return f"{as_int(mf.ternary.value)}&&&{as_int(mf.ternary.mask)}"
    if kind == "range":
        return f"{as_int(mf.range.low)}..{as_int(mf.range.high)}"
    raise ValueError(f"unsupported match kind {kind}")


def read(tables):
    out = []
    for table in tables:
        for te in sh.TableEntry(table).read():
            entry = {"table": table, "match": {}, "action": te.action.action_name, "params": {}}
            for name, mf in te.match._mk.items():
                entry["match"][name] = match_text(mf)
            for name, param in te.action._param_values.items():
                entry["params"][name] = as_int(param.value)
            if te.priority:
                entry["priority"] = te.priority
            out.append(entry)
    print(json.dumps(out, sort_keys=True))


def write(entries):
    for spec in entries:
        te = sh.TableEntry(spec["table"])(action=spec["action"])
        for name, text in spec.get("match", {}).items():
            te.match[name] = text
        for name, text in spec.get("params", {}).items():
            te.action[name] = text
        if "priority" in spec:
            te.priority = spec["priority"]
        te.insert()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", required=True)
    parser.add_argument("mode", choices=["read", "write"])
    parser.add_argument("tables", nargs="*")
    args = parser.parse_args()
    sh.setup(device_id=0, grpc_addr=args.addr, election_id=(0, 50), config=None, verbose=False)
    try:
        if args.mode == "read":
            read(args.tables)
        else:
            write(json.load(sys.stdin))
    finally:
        sh.teardown()


if __name__ == "__main__":
    main()
