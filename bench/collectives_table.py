#!/usr/bin/env python3
"""Prints bench/collectives.sh's table from its JSONL results: all-reduce
busbw (GB/s) per size and rank count, with meshtrain's ratios to OpenMPI and
to the best Gloo algorithm, then 4 KiB latency (us) and memcpy bandwidth.

"tcp best" is the better of meshtrain's tcp ring and tcp auto, as "gloo best"
is the best of Gloo's four algorithms: the TCP target compares transports,
each with its best algorithm at that size."""
import json
import sys
from collections import defaultdict

COLUMNS = [  # (heading, predicate on a result line)
    ("shm ring", lambda r: r["transport"] == "shm" and r["algo"] == "ring"),
    ("shm auto", lambda r: r["transport"] == "shm" and r["algo"] == "auto"),
    ("tcp ring", lambda r: r["transport"] == "tcp" and r["algo"] == "ring"),
    ("tcp auto", lambda r: r["transport"] == "tcp" and r["algo"] == "auto"),
    ("shm RS", lambda r: r["transport"] == "shm" and r["algo"] == "reduction_server"),
    ("openmpi", lambda r: r["transport"] == "openmpi"),
    ("gloo best", lambda r: r["transport"] == "gloo_tcp"),
]


def size_name(b):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale}{unit}"
    return str(b)


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    # best[(n, bytes)][column] = (busbw, time_us, algo): the best line of that column
    best = defaultdict(dict)
    for r in rows:
        if r["collective"] != "all_reduce":
            continue
        for name, match in COLUMNS:
            if match(r):
                key = (r["nproc"], r["bytes"])
                if name not in best[key] or r["busbw_GBps"] > best[key][name][0]:
                    best[key][name] = (r["busbw_GBps"], r["time_us"], r["algo"])
    heads = [c[0] for c in COLUMNS]
    print("\nall-reduce busbw, GB/s (fp32 sum; median time, slowest rank)")
    print("| n | size | " + " | ".join(heads) + " | shm ring / openmpi | shm ring / gloo best | tcp best / gloo best | gloo best algo |")
    print("|---" * (len(heads) + 6) + "|")
    for (n, b) in sorted(best):
        cols = best[(n, b)]
        bw = {h: cols[h][0] if h in cols else None for h in heads}
        cells = [f"{bw[h]:.3f}" if bw[h] is not None else "-" for h in heads]
        gloo_algo = cols["gloo best"][2] if "gloo best" in cols else "-"
        tcp_best = max((bw[h] for h in ("tcp ring", "tcp auto") if bw[h] is not None), default=None)
        print(f"| {n} | {size_name(b)} | " + " | ".join(cells) +
              f" | {ratio(bw['shm ring'], bw['openmpi'])} | {ratio(bw['shm ring'], bw['gloo best'])}"
              f" | {ratio(tcp_best, bw['gloo best'])} | {gloo_algo} |")
    smallest = min((b for (_, b) in best), default=None)
    if smallest is not None:
        print(f"\n{size_name(smallest)} latency, us (lower is better)")
        print("| n | " + " | ".join(heads) + " |")
        print("|---" * (len(heads) + 1) + "|")
        for n in sorted({n for (n, _) in best}):
            cols = best.get((n, smallest), {})
            # for latency take the fastest line of each column
            cells = []
            for name, match in COLUMNS:
                times = [r["time_us"] for r in rows if r["collective"] == "all_reduce" and r["nproc"] == n
                         and r["bytes"] == smallest and match(r)]
                cells.append(f"{min(times):.1f}" if times else "-")
            print(f"| {n} | " + " | ".join(cells) + " |")
    mem = [r for r in rows if r["collective"] == "memcpy"]
    if mem:
        print("\nmemcpy, 1 thread: " + ", ".join(f"{size_name(r['bytes'])} {r['algbw_GBps']:.1f} GB/s" for r in mem))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/out/collectives/results.jsonl")
