#!/usr/bin/env python3
"""Exit 0 if two compiler artifacts are the same, 1 otherwise.

Byte-identical files are the same. JSON (bfrt.json) is compared with the
keys that name the build rather than the program set aside (compiler
version, build date, source paths), set-like lists sorted and the
compiler's own snapshot tables left out; RESOURCES.md with its compile-time
line set aside, since that varies from run to run.
"""
import json
import sys

VOLATILE_KEYS = {"build_date", "compiler_version", "compile_command", "run_id",
                 "source_info", "program_name"}


# Lists that are sets: bf-p4c writes them in a run-dependent order
# (bfrt.json's `depends_on` of pipe.snapshot.cfg was seen both ways).
UNORDERED_KEYS = {"depends_on"}


# Tables bf-p4c adds for the driver's pipeline snapshots, not the program's:
# their ids and order vary between runs of the same compiler on the same
# source (seen: pipe.snapshot.cfg as 2433099927 and 2436788429, ingress and
# egress triggers swapped), and nothing of Foresight uses them.
COMPILER_TABLE_PREFIX = "pipe.snapshot."


def strip(node):
    if isinstance(node, dict):
        if isinstance(node.get("tables"), list):
            node = dict(node, tables=[t for t in node["tables"]
                                      if not str(t.get("name", "")).startswith(COMPILER_TABLE_PREFIX)])
        return {k: sorted(v) if k in UNORDERED_KEYS and isinstance(v, list) else strip(v)
                for k, v in node.items() if k not in VOLATILE_KEYS}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def first_difference(x, y, path="/"):
    """Path of the first place two JSON values differ, or None."""
    if type(x) is not type(y):
        return path
    if isinstance(x, dict):
        for k in sorted(set(x) | set(y)):
            if k not in x or k not in y:
                return f"{path}{k}"
            d = first_difference(x[k], y[k], f"{path}{k}/")
            if d:
                return d
        return None
    if isinstance(x, list):
        if len(x) != len(y):
            return f"{path} (length {len(x)} vs {len(y)})"
        for i, (u, v) in enumerate(zip(x, y)):
            d = first_difference(u, v, f"{path}{i}/")
            if d:
                return d
        return None
    return None if x == y else path


def main(a, b):
    try:
        da, db = open(a, "rb").read(), open(b, "rb").read()
    except OSError as e:
        print(f"cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    if da == db:
        return 0
    if a.endswith(".json"):
        where = first_difference(strip(json.loads(da)), strip(json.loads(db)))
        if where is None:
            return 0
        print(f"{b} differs from {a} at {where}", file=sys.stderr)
        return 1
    if a.endswith(".md"):
        def lines(d):
            return [l for l in d.decode().splitlines() if not l.lower().startswith("compile time")]
        return 0 if lines(da) == lines(db) else 1
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
