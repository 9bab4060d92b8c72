#!/usr/bin/env python3
"""Summarizes a meshtrain metrics.jsonl for the data-parallel benchmarks.

usage: dp_metrics.py METRICS.jsonl SKIP LAYERS D CTX [key=value ...]

Prints one JSON line: medians over the step records after the first SKIP
(warm-up) steps of tokens_per_s (global, all workers), step_ms, comm_ms (time
the communication thread spent on the step's gradient buckets), comm_exposed_ms
(time the step waited for them after backward), and the hidden share of
communication, 1 - exposed/busy: its median over steps ("hidden_median") and
the pooled ratio 1 - sum(exposed)/sum(busy) ("hidden_pooled"), and, where the
records carry it, comm_bytes (bytes the rank sent plus received in collectives
in the step; bench/zero.sh compares it across ZeRO stages). GFLOP/s uses
FLOPs per token = 6*N + 12*L*d*ctx, N = 12*L*d^2 + (V+ctx)*d (as
bench/peers/torch_gpt.py; V = 256, or the pair vocab=V). Extra key=value
pairs are copied into the line.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_flops import flops_per_token, params  # noqa: E402


def main():
    path, skip = sys.argv[1], int(sys.argv[2])
    L, d, ctx = map(int, sys.argv[3:6])
    extra = dict(kv.split("=", 1) for kv in sys.argv[6:])
    vocab = int(extra.pop("vocab", 256))
    rows = []
    with open(path) as f:
        for ln in f:
            ln = ln.strip()
            if ln:
                r = json.loads(ln)
                if "tokens_per_s" in r:
                    rows.append(r)
    rows.sort(key=lambda r: r.get("step", 0))
    timed = rows[skip:] if len(rows) > skip else rows
    if not timed:
        sys.exit("no metric lines with tokens_per_s in " + path)
    med = lambda k: statistics.median(r[k] for r in timed) if all(k in r for r in timed) else None
    n, fpt = params(L, d, ctx, vocab), flops_per_token(L, d, ctx, vocab)
    tps = med("tokens_per_s")
    out = {"tokens_per_s": round(tps, 1), "gflops": round(tps * fpt / 1e9, 2),
           "tokens_per_s_min": round(min(r["tokens_per_s"] for r in timed), 1),
           "tokens_per_s_max": round(max(r["tokens_per_s"] for r in timed), 1),
           "step_ms": round(med("step_ms"), 1), "workers": timed[-1].get("workers", 1),
           "steps_timed": len(timed), "steps_skipped": len(rows) - len(timed),
           "loss_last": timed[-1].get("loss"), "N": n, "flops_per_token": fpt}
    if all("comm_ms" in r for r in timed):
        busy = [r["comm_ms"] for r in timed]
        exposed = [r.get("comm_exposed_ms", 0.0) for r in timed]
        shares = [1.0 - e / b for b, e in zip(busy, exposed) if b > 0]
        out.update({
            "comm_ms": round(statistics.median(busy), 1),
            "comm_exposed_ms": round(statistics.median(exposed), 1),
            "hidden_median": round(statistics.median(shares), 3) if shares else None,
            "hidden_pooled": round(1.0 - sum(exposed) / sum(busy), 3) if sum(busy) > 0 else None,
            "comm_share_of_step": round(statistics.median(b / r["step_ms"] for b, r in zip(busy, timed)), 3),
        })
    if all("comm_bytes" in r for r in timed):
        out["comm_bytes"] = med("comm_bytes")
    out.update(extra)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
