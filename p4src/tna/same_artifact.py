#!/usr/bin/env python3
"""Exit 0 if two compiler artifacts are the same, 1 otherwise.

Byte-identical files are the same. JSON (bfrt.json) is compared with the
keys that name the build rather than the program set aside (compiler
version, build date, source paths); RESOURCES.md with its compile-time line
set aside, since that varies from run to run.
"""
import json
import sys

VOLATILE_KEYS = {"build_date", "compiler_version", "compile_command", "run_id",
                 "source_info", "program_name"}


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k not in VOLATILE_KEYS}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main(a, b):
    try:
        da, db = open(a, "rb").read(), open(b, "rb").read()
    except OSError as e:
        print(f"cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    if da == db:
        return 0
    if a.endswith(".json"):
        return 0 if strip(json.loads(da)) == strip(json.loads(db)) else 1
    if a.endswith(".md"):
        def lines(d):
            return [l for l in d.decode().splitlines() if not l.lower().startswith("compile time")]
        return 0 if lines(da) == lines(db) else 1
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
