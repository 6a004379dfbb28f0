"""Insert N exact-match entries with finsy (asyncio), in batches.

Prints {"client": "finsy", "entries": N, "seconds": T, "batch": B} as JSON.
Used by `cargo bench -p p4rt --bench write_rate` for comparison.
"""

import argparse
import asyncio
import json
import time
from pathlib import Path

import finsy as fy


async def run(args):
    options = fy.SwitchOptions(p4info=Path(args.p4info), device_id=0, initial_election_id=60)
    switch = fy.Switch("bench", args.addr, options)
    async with switch:
        entries = [
            fy.P4TableEntry(
                "exact_table",
                match=fy.P4TableMatch(dst_addr=i),
                action=fy.P4TableAction("set_port", port=1),
            )
            for i in range(args.first_key, args.first_key + args.count)
        ]
        start = time.perf_counter()
        for k in range(0, len(entries), args.batch):
            await switch.insert(entries[k : k + args.batch])
        return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", required=True)
    parser.add_argument("--p4info", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--first-key", type=int, default=1)
    args = parser.parse_args()
    seconds = asyncio.run(run(args))
    print(json.dumps({"client": "finsy", "entries": args.count, "seconds": seconds, "batch": args.batch}))


if __name__ == "__main__":
    main()
