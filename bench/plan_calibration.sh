#!/usr/bin/env bash
# `meshtrain plan --config` against the runs it forecasts, on the benchmark
# configs (tests/integration/plan_calibration.sh does the same on a tiny
# model in CI). For each config of $CONFIGS and each setting of $SETTINGS it
#   1. forecasts: meshtrain plan --config examples/gpt-bench-<c>.toml --json ARGS
#   2. runs:      meshtrain launch --nproc W -- meshtrain train ... ARGS   (W = 1: no launch)
# and prints predicted and measured peak memory per rank (the lead's tracked
# total) and step time (median of the steps after $SKIP), with the errors.
#
# Settings are "WORKERS:STAGE:THREADS[:TENSOR]" (TENSOR: parallel.tensor,
# default 1). Knobs (defaults in brackets):
#   CONFIGS ["a b"] (any of a b gpt2)  SETTINGS ["1:0:1 1:0:2 2:0:1 2:1:1 2:2:1 2:3:1 2:0:1:2"]  STEPS [16]  SKIP [5]
#   MESHTRAIN [build/src/meshtrain/meshtrain]  OUT [bench/out/plan_calibration]
#   IDLE_WAIT [120] IDLE_PCT [10] (bench/idle.sh)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
MESHTRAIN=${MESHTRAIN:-build/src/meshtrain/meshtrain}
OUT=${OUT:-bench/out/plan_calibration}
CONFIGS=${CONFIGS:-"a b"}
SETTINGS=${SETTINGS:-"1:0:1 1:0:2 2:0:1 2:1:1 2:2:1 2:3:1 2:0:1:2"}
STEPS=${STEPS:-16}
SKIP=${SKIP:-5}
IDLE_WAIT=${IDLE_WAIT:-120}
IDLE_PCT=${IDLE_PCT:-10}
source bench/bench_lib.sh  # (sources bench/idle.sh)
[[ " $CONFIGS " == *" gpt2 "* ]] && bench_gpt2_tokens  # the token file examples/gpt-bench-gpt2.toml reads
mkdir -p "$OUT"
: > "$OUT/results.jsonl"

for c in $CONFIGS; do
  for setting in $SETTINGS; do
    IFS=: read -r workers stage threads tensor <<< "$setting"
    tensor=${tensor:-1}
    name="$c-w$workers-s$stage-t$threads"
    [ "$tensor" -gt 1 ] && name+="-tp$tensor"
    args=(--training.steps="$STEPS" --training.log_every=1 --training.eval_every=0 --training.eval_batches=1
          --checkpoint.every=0 --training.threads="$threads" --parallel.workers="$workers"
          --parallel.zero_stage="$stage" --parallel.tensor="$tensor" --training.out_dir="$OUT/$name")
    [ "$workers" -gt "$tensor" ] && args+=(--parallel.data=allreduce) || args+=(--parallel.data=none)
    wait_idle
    "$MESHTRAIN" plan --config "examples/gpt-bench-$c.toml" --json "${args[@]}" > "$OUT/$name.plan.json" \
      2> "$OUT/$name.plan.log" || { cat "$OUT/$name.plan.log"; continue; }
    rm -rf "${OUT:?}/$name"
    cmd=("$MESHTRAIN" train "examples/gpt-bench-$c.toml" "${args[@]}")
    [ "$workers" -gt 1 ] && cmd=("$MESHTRAIN" launch --nproc "$workers" -- "${cmd[@]}")
    wait_idle
    "${cmd[@]}" > "$OUT/$name.log" 2>&1 || { tail -5 "$OUT/$name.log"; continue; }
    python3 - "$OUT" "$name" "$SKIP" >> "$OUT/results.jsonl" <<'PY'
import json, statistics, sys
out, name, skip = sys.argv[1], sys.argv[2], int(sys.argv[3])
plan = json.load(open(f"{out}/{name}.plan.json"))
records = [json.loads(line) for line in open(f"{out}/{name}/metrics.jsonl")]
steps = [r["step_ms"] / 1e3 for r in records if "step_ms" in r][skip:]
peak = [r for r in records if r.get("memory") == "peak"][-1]["peak_total_mb"] * 2**20
print(json.dumps({"run": name, "predicted_mib": plan["memory_bytes"]["total"] / 2**20, "measured_mib": peak / 2**20,
                  "predicted_ms": plan["step_s"]["total"] * 1e3, "measured_ms": statistics.median(steps) * 1e3,
                  "forward_backward_alone_ms": plan["step_s"]["forward_backward_alone"] * 1e3,
                  "comm_ms": plan["step_s"]["communication"] * 1e3}))
PY
  done
done

python3 - "$OUT/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("| run (config-workers-stage-threads) | memory predicted / measured MiB | error | step predicted / measured ms | error |")
print("|---|---|---|---|---|")
for r in rows:
    me = (r["predicted_mib"] - r["measured_mib"]) / r["measured_mib"]
    se = (r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"]
    print(f"| {r['run']} | {r['predicted_mib']:.1f} / {r['measured_mib']:.1f} | {me:+.1%} | "
          f"{r['predicted_ms']:.1f} / {r['measured_ms']:.1f} | {se:+.1%} |")
PY
