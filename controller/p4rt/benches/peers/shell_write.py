"""Insert N exact-match entries with p4runtime-shell, one update per request.

Prints {"client": "p4runtime-shell", "entries": N, "seconds": T} as JSON.
Used by `cargo bench -p p4rt --bench write_rate` for comparison.
"""

import argparse
import json
import time

import p4runtime_sh.shell as sh


def mac(i):
    return ":".join(f"{b:02x}" for b in i.to_bytes(6, "big"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--first-key", type=int, default=1)
    args = parser.parse_args()
    # config=None: use the pipeline already on the switch (P4Info fetched from it).
    sh.setup(device_id=0, grpc_addr=args.addr, election_id=(0, 50), config=None, verbose=False)
    try:
        start = time.perf_counter()
        for i in range(args.first_key, args.first_key + args.count):
            entry = sh.TableEntry("exact_table")(action="set_port")
            entry.match["dst_addr"] = mac(i)
            entry.action["port"] = "1"
            entry.insert()
        seconds = time.perf_counter() - start
    finally:
        sh.teardown()
    print(json.dumps({"client": "p4runtime-shell", "entries": args.count, "seconds": seconds}))


if __name__ == "__main__":
    main()
