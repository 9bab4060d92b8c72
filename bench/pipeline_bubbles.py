#!/usr/bin/env python3
"""The figures of bench/pipeline_parallel.sh.

  summary LABEL ROUND DIR SKIP "OVERRIDES"   one meshtrain run's JSON line: tokens/s (median over the
                                              steps after SKIP, from step_ms), and with a trace the bubble
                                              of its last step against the schedule's formula
  show                                        one result line (stdin) as text
  report RESULTS.jsonl                        the tables and ratios over the rounds (medians)

The measured bubble is 1 - (compute time of the P stages) / (P x the step's span), over the stages of
data replica 0 and tensor rank 0 (every send and receive counts as idle, as the formulas count them).
Beside the formula (which assumes equal stages and, for ZB-H1, F = B = W) stands the schedule simulated
with each stage's own median action times of the traced step (`meshtrain bench schedule --costs
F,B,W,...` per rank, $MESHTRAIN): what the schedule gives stages of this speed, jitter left out.
"""
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_flops  # noqa: E402

CTX = 256


def formula(schedule, P, M, V):
    if schedule in ("gpipe", "1f1b"):
        return (P - 1) / (M + P - 1)
    if schedule == "interleaved":
        return (P - 1) / (V * M + P - 1)
    if schedule == "zero_bubble":  # ZB-H1 with F = B = W
        return (P - 1) / (3 * M + P - 1)
    raise ValueError(schedule)


def trace_bubble(path):
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    stages = {}
    for e in events:
        a = e["args"]
        if a.get("dp", 0) or a.get("tp", 0):
            continue
        s = stages.setdefault(a["pp"], {"busy": 0.0, "start": float("inf"), "end": 0.0, "kinds": {}})
        s["start"] = min(s["start"], e["ts"])
        s["end"] = max(s["end"], e["ts"] + e["dur"])
        if e["cat"] == "compute":
            s["busy"] += e["dur"]
            k = s["kinds"].setdefault(e["name"], [])
            k.append(e["dur"])
    start = min(s["start"] for s in stages.values())
    end = max(s["end"] for s in stages.values())
    span = end - start
    busy = sum(s["busy"] for s in stages.values())
    costs = {}
    for s in stages.values():
        for k, v in s["kinds"].items():
            costs.setdefault(k, []).extend(v)
    per_stage = [{k: statistics.median(v) / 1e3 for k, v in stages[p]["kinds"].items()} for p in sorted(stages)]
    return (1 - busy / (len(stages) * span), span / 1e3, {k: round(statistics.median(v) / 1e3, 2) for k, v in costs.items()},
            per_stage)


def summary(label, rnd, run_dir, skip, overrides):
    opts = dict(re.findall(r"--([\w.]+)=(\S+)", overrides))
    steps = [json.loads(l) for l in open(run_dir + "/metrics.jsonl") if '"step_ms"' in l]
    steps.sort(key=lambda r: r["step"])
    timed = steps[int(skip):] or steps
    batch = int(opts.get("training.batch_size", 8))
    tps = [batch * CTX / (r["step_ms"] / 1e3) for r in timed]
    out = {"label": label, "round": int(rnd), "runner": "meshtrain", "tokens_per_s": round(statistics.median(tps), 1),
           "step_ms": round(statistics.median(r["step_ms"] for r in timed), 1), "batch": batch}
    P = int(opts.get("parallel.pipeline", 1))
    out["P"] = P
    out["M"] = int(opts.get("parallel.micro_batches", 1))
    if P > 1:
        S = opts.get("parallel.schedule", "1f1b")
        V = int(opts.get("parallel.virtual_stages", 1))
        bubble, span_ms, costs, per_stage = trace_bubble(run_dir + "/trace.json")
        out.update(schedule=S, V=V, bubble=round(bubble, 4), bubble_formula=round(formula(S, P, out["M"], V), 4),
                   traced_step_ms=round(span_ms, 1), action_ms=costs)
        # Each stage's median forward, backward (input) and weight times.
        rows = []
        for c in per_stage:
            b, w = (c["backward_input"], c["backward_weight"]) if "backward_input" in c else (c.get("backward", 0.0), 0.0)
            rows.append("%g,%g,%g" % (c.get("forward", 0.0), b, w))
        sim = subprocess.run([os.environ.get("MESHTRAIN", "build/src/meshtrain/meshtrain"), "bench", "schedule",
                              "--schedule", S, "--stages", str(P), "--micro-batches", str(out["M"]),
                              "--virtual-stages", str(V), "--costs", ",".join(rows), "--json"],
                             capture_output=True, text=True, check=True)
        out["bubble_simulated"] = round(json.loads(sim.stdout)["bubble"], 4)
    print(json.dumps(out))


def show():
    r = json.loads(sys.stdin.readline())
    text = "  %-28s %8.0f tokens/s" % (r["label"], r["tokens_per_s"])
    if "bubble" in r:
        text += "  bubble %.3f (formula %.3f, ratio %.2f; simulated %.3f, ratio %.2f)  actions %s" % (
            r["bubble"], r["bubble_formula"], r["bubble"] / r["bubble_formula"], r["bubble_simulated"],
            r["bubble"] / r["bubble_simulated"], r["action_ms"])
    print(text)


def report(path, bf16_peak=""):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by = {}
    for r in rows:
        by.setdefault(r["label"], []).append(r)
    med = lambda label, key: statistics.median(r[key] for r in by[label]) if label in by else None
    print("\n== bubbles (median over rounds): measured / formula")
    print("  %-12s %2s %3s %9s %9s %6s %9s %6s %12s" % ("schedule", "P", "M", "measured", "formula", "ratio",
                                                         "simulated", "ratio", "tokens/s"))
    for label in sorted((l for l in by if l.startswith("bubble-")), key=lambda l: (by[l][0]["P"], by[l][0]["schedule"], by[l][0]["M"])):
        r = by[label][0]
        m = med(label, "bubble")
        sim = med(label, "bubble_simulated")
        print("  %-12s %2d %3d %9.3f %9.3f %6.2f %9.3f %6.2f %12.0f" % (
            r["schedule"], r["P"], r["M"], m, r["bubble_formula"], m / r["bubble_formula"], sim, m / sim,
            med(label, "tokens_per_s")))
    print("\n== efficiency at P = 2: tokens/s / (2 x one process x (1 - formula bubble)); one process alone, and")
    print("   (the machine's own ceiling) 2 single processes at once, one of them")
    for label in sorted(l for l in by if l.startswith("bubble-") and by[l][0]["P"] == 2):
        r = by[label][0]
        one, two = med("one-m%d" % r["M"], "tokens_per_s"), med("two-m%d" % r["M"], "tokens_per_s")
        if one:
            pp = med(label, "tokens_per_s")
            text = "  %-28s %.1f%% of alone" % (label, 100 * pp / (2 * one * (1 - r["bubble_formula"])))
            if two:
                text += ", %.1f%% of two at once (which run at %.1f%% of alone)" % (
                    100 * pp / (2 * two * (1 - r["bubble_formula"])), 100 * two / one)
            print(text)
    for M in (4, 8, 16):
        z, f = med("bubble-zero_bubble-p2-m%d" % M, "tokens_per_s"), med("bubble-1f1b-p2-m%d" % M, "tokens_per_s")
        if z and f:
            want = (1 - formula("zero_bubble", 2, M, 1)) / (1 - formula("1f1b", 2, M, 1))
            print("  zero_bubble / 1f1b at P=2 M=%d: %.3f (formulas predict %.3f)" % (M, z / f, want))
    print("\n== against torch.distributed.pipelining, config B, P = 2, M = 4, 1 thread per process")
    mt1, t1 = med("mt-one", "tokens_per_s"), med("torch-one", "tokens_per_s")
    if mt1 and t1:
        print("  one process: meshtrain %.0f, PyTorch %.0f tokens/s: %.2fx" % (mt1, t1, mt1 / t1))
    for s in ("gpipe", "1f1b", "interleaved", "zero_bubble"):
        mt = med("mt-pp2-" + s, "tokens_per_s")
        peer = "torch-pp2-" + ("zero_bubble-v1" if s == "zero_bubble" else s)
        t = med(peer, "tokens_per_s")
        if mt and t and mt1 and t1:
            print("  %-12s meshtrain %.0f, PyTorch (%s) %.0f tokens/s: %.2fx (target 1.5x: %s); against the one-process "
                  "ratio %.2f" % (s, mt, peer, t, mt / t, "met" if mt / t >= 1.5 else "NOT met", (mt / t) / (mt1 / t1)))
    if bf16_peak:
        # the physical limit: config B's model FLOPs per second against both cores' bf16 GEMM rate
        L, d = 6, 384
        fpt = model_flops.flops_per_token(L, d, CTX)
        for label in ["mt-one"] + ["mt-pp2-" + s for s in ("gpipe", "1f1b", "interleaved", "zero_bubble")]:
            t = med(label, "tokens_per_s")
            if t:
                print("  %-22s %.0f model GFLOP/s = %.0f%% of the bf16 GEMM rate on 2 threads (%s GFLOP/s)%s" % (
                    label, t * fpt / 1e9, 100 * t * fpt / 1e9 / float(bf16_peak), bf16_peak,
                    " (one process uses 1 of the 2 cores)" if label == "mt-one" else ""))
    best = max((med(l, "tokens_per_s"), l) for l in by if l.startswith("torch-pp2-")) if any(l.startswith("torch-pp2-") for l in by) else None
    zb = med("mt-pp2-zero_bubble", "tokens_per_s")
    if best and zb:
        print("  meshtrain zero_bubble %.0f against PyTorch's best schedule (%s) %.0f: %.2fx" % (zb, best[1], best[0], zb / best[0]))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "summary":
        summary(*sys.argv[2:7])
    elif cmd == "show":
        show()
    elif cmd == "report":
        report(*sys.argv[2:4])
