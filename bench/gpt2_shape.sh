#!/usr/bin/env bash
# GPT-2 small's shape on the CPU (issue 38): 12 layers, width 768, 12 heads,
# context 1024, vocabulary 50257, bf16, batch 4 per process, random token
# ids. In one run, alternating where it matters:
#   * meshtrain, flash attention (examples/gpt-bench-gpt2.toml) and the
#     kernel that keeps the probabilities, 1 process x $THREADS threads
#   * PyTorch (bench/.venv) bf16 autocast with SDPA, torch.compile and eager
#   * data parallel 2 x 1 thread: meshtrain (flash) and PyTorch DDP (bf16
#     autocast, torch.compile and eager; peak RSS of the largest rank on both
#     sides) (ROWS=dp; off by default: about 15 minutes more)
#   * the largest batch that fits this machine's memory (ROWS=fit; off by
#     default: about 20 minutes): meshtrain (flash) and PyTorch compiled, 2
#     steps each at FIT_BATCHES, a line through their peak RSS predicts each
#     side's largest batch under FIT_LIMIT_MIB, and one run per side at that
#     batch confirms it (finished, and its peak RSS)
#   * the bf16 GEMM rate of this machine (build/bench/bench_gemm --bf16-peak)
# and prints tokens/s (median of the timed steps), the model's GFLOP/s as a
# share of the bf16 GEMM rate, peak RSS (meshtrain: GNU time; PyTorch: its
# own getrusage), and meshtrain's activation peak against its formula
# (core/activation_memory.hpp). Results: bench/RESULTS.md; every run:
# bench/log/.
#
# Knobs: THREADS [2] BATCH [4] MT_STEPS [6] MT_SKIP [2] TORCH_STEPS [4]
#   TORCH_WARMUP [2] COMPILE_WARMUP [3] ROWS ["one"; "one dp fit"] IDLE_WAIT [120]
#   FIT_BATCHES ["4 8"] FIT_LIMIT_MIB [MemAvailable at the start - 1024]
#   IDLE_PCT [10] VENV_PY MESHTRAIN OUT [bench/out/gpt2_shape]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
THREADS="${THREADS:-2}"
BATCH="${BATCH:-4}"
MT_STEPS="${MT_STEPS:-6}"
MT_SKIP="${MT_SKIP:-2}"
TORCH_STEPS="${TORCH_STEPS:-4}"
TORCH_WARMUP="${TORCH_WARMUP:-2}"
COMPILE_WARMUP="${COMPILE_WARMUP:-3}"
ROWS="${ROWS:-one}"
FIT_BATCHES="${FIT_BATCHES:-4 8}"
FIT_LIMIT_MIB="${FIT_LIMIT_MIB:-$(( $(awk '/^MemAvailable/ {print $2}' /proc/meminfo) / 1024 - 1024 ))}"
IDLE_WAIT="${IDLE_WAIT:-120}"
IDLE_PCT="${IDLE_PCT:-10}"
VENV_PY="${VENV_PY:-$root/bench/.venv/bin/python}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/gpt2_shape}"
BENCH_PY="$(command -v python3)"
source bench/bench_lib.sh
bench_results
bench_gpt2_tokens
tokens="$root/data/bench-gpt2.bin"

echo "gpt2_shape: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(bench_cpu_model), flags: $(bench_cpu_flags avx512f avx512_bf16 amx_bf16)"
echo "tree $(git rev-parse --short HEAD)$(git diff --quiet || echo +changes), torch $(bench_torch_version "$VENV_PY" none)"
bench_bf16_peak "$OUT/gemm.txt"
bf16_peak=$bf16_peak_2
[ "$THREADS" = 1 ] && bf16_peak=$bf16_peak_1
mt_common=(--data.train_path="$tokens" --data.val_path="$tokens" --training.eval_batches=1)

# The rows run BATCH sequences per process for MT_STEPS / TORCH_STEPS steps; ROW_BATCH and ROW_STEPS
# (set for one call) override them.
meshtrain_row() {  # RUNNER NPROC THREADS ARGS...
  local runner=$1 nproc=$2 threads=$3 batch=${ROW_BATCH:-$BATCH} steps=${ROW_STEPS:-$MT_STEPS}
  shift 3
  local dir="$OUT/$runner"
  rm -rf "$dir"
  bench_threads "$threads"
  bench_mt_cmd "$nproc" shm "$MESHTRAIN" train examples/gpt-bench-gpt2.toml "${mt_common[@]}" \
    --training.batch_size="$batch" --training.steps="$steps" --training.threads="$threads" --training.out_dir="$dir" "$@"
  [ "$nproc" -gt 1 ] && mt_cmd+=(--parallel.data=allreduce)
  bench_run --rss "$OUT/$runner.rss" "$runner" "$OUT/$runner.log" "${mt_cmd[@]}" || return
  bench_record "$(python3 - "$dir/metrics.jsonl" "$MT_SKIP" "$OUT/$runner.rss" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "tokens_per_s" in r]
steps = steps[int(sys.argv[2]):] or steps[-1:]  # a short fit run times its last step
mem = [r for r in rows if r.get("memory") == "peak"]
out = {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in steps), "steps_timed": len(steps),
       "peak_rss_mb": int(open(sys.argv[3]).read().split()[-1]) / 1024}
if mem:
    out.update(activations_mb=mem[-1]["peak_activations_mb"], formula_mb=mem[-1]["predicted_activations_mb"])
print(json.dumps(out))
PY
)" "runner=$runner" "batch:=$batch"
}

torch_row() {  # RUNNER MODE WARMUP [PEER NPROC THREADS]
  local runner=$1 mode=$2 warm=$3 peer=${4:-torch_gpt.py} nproc=${5:-1} threads=${6:-$THREADS}
  local batch=${ROW_BATCH:-$BATCH} steps=${ROW_STEPS:-$TORCH_STEPS}
  bench_need "$runner" "$VENV_PY" "run bench/setup-venv.sh" || return
  local extra=()
  [ "$nproc" -gt 1 ] && extra=(--nproc "$nproc")
  local model
  mapfile -t model < <(bench_peer_model 12 768 12 1024 "$batch" "$threads" unset sdpa)
  if bench_run_peer "$runner" "$OUT/$runner" "$VENV_PY" "$peer" "${model[@]}" --vocab 50257 --precision bf16 \
       --steps "$steps" --warmup "$warm" --mode "$mode" "${extra[@]}" --json; then
    bench_record "$peer_line" "runner=$runner" "batch:=$batch"
  else
    bench_failed "$OUT/$runner.err"
  fi
}

for row in $ROWS; do
  case "$row" in
    one)
      meshtrain_row meshtrain-flash 1 "$THREADS"
      torch_row torch-compile compile "$COMPILE_WARMUP"
      meshtrain_row meshtrain-probabilities 1 "$THREADS" --training.attention=probabilities
      torch_row torch-eager eager "$TORCH_WARMUP"
      ;;
    dp)
      meshtrain_row meshtrain-dp2 2 1
      torch_row torch-ddp2-compile compile "$COMPILE_WARMUP" torch_ddp_gpt.py 2 1
      torch_row torch-ddp2 eager "$TORCH_WARMUP" torch_ddp_gpt.py 2 1
      ;;
    fit)
      # 2 steps each (compiled PyTorch: its first, compiling, step and one more; AdamW's state exists
      # from the first step on), a line through the peaks, then one run per side at its prediction.
      for b in $FIT_BATCHES; do
        ROW_BATCH=$b ROW_STEPS=2 meshtrain_row "fit-meshtrain-b$b" 1 "$THREADS"
        ROW_BATCH=$b ROW_STEPS=1 torch_row "fit-torch-compile-b$b" compile 1
      done
      for side in meshtrain torch-compile; do
        b=$(python3 - "$results" "$side" "$FIT_LIMIT_MIB" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["runner"].startswith("fit-%s-b" % sys.argv[2])]
pts = sorted((r["batch"], r["peak_rss_mb"]) for r in rows if r.get("peak_rss_mb"))
if len(pts) >= 2:
    (b0, m0), (b1, m1) = pts[0], pts[-1]
    slope = (m1 - m0) / (b1 - b0)
    print(int((float(sys.argv[3]) - (m0 - slope * b0)) // slope) if slope > 0 else "")
PY
)
        [ -n "$b" ] || { echo "fit: $side: no two peaks to predict from"; continue; }
        echo "fit: $side: the line through its peaks predicts batch $b under $FIT_LIMIT_MIB MiB; running it"
        if [ "$side" = meshtrain ]; then ROW_BATCH=$b ROW_STEPS=2 meshtrain_row "fit-meshtrain-max" 1 "$THREADS"
        else ROW_BATCH=$b ROW_STEPS=1 torch_row "fit-torch-compile-max" compile 1; fi
      done
      ;;
    *) echo "unknown row $row (one dp fit)"; exit 2 ;;
  esac
done

echo
python3 - "$results" "$bf16_peak" <<'PY'
import json, sys
rows = {r["runner"]: r for r in map(json.loads, open(sys.argv[1]))}
peak = float(sys.argv[2])
L, d, ctx, V = 12, 768, 1024, 50257
sys.path.insert(0, "bench")
from model_flops import flops_per_token
fpt = flops_per_token(L, d, ctx, V)
print(f"bf16 GEMM rate {peak:.0f} GFLOP/s; model FLOPs per token {fpt / 1e6:.0f} M")
print("| runner | tokens/s | model GFLOP/s | % of bf16 GEMM rate | peak RSS MiB | activations MiB (formula) |")
print("|---|---|---|---|---|---|")
for name, r in rows.items():
    g = r["tokens_per_s"] * fpt / 1e9
    act = f"{r['activations_mb']:.0f} ({r['formula_mb']:.0f})" if "activations_mb" in r else ""
    print(f"| {name} | {r['tokens_per_s']:.0f} | {g:.0f} | {100 * g / peak:.0f}% | {r.get('peak_rss_mb', 0):.0f} | {act} |")
def ratio(a, b):
    if a in rows and b in rows:
        rss = [rows[x].get("peak_rss_mb", 0) for x in (a, b)]
        print(f"{a} / {b}: {rows[a]['tokens_per_s'] / rows[b]['tokens_per_s']:.2f}x tokens/s"
              + (f", {rss[0] / rss[1]:.2f}x peak RSS" if rss[1] else ""))
for side in ("meshtrain", "torch-compile"):
    fit = rows.get("fit-%s-max" % side)
    pts = sorted((r["batch"], r["peak_rss_mb"]) for n, r in rows.items() if n.startswith("fit-%s-b" % side))
    if len(pts) >= 2:
        per = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
        print(f"fit {side}: peak RSS " + ", ".join(f"{m:.0f} MiB at batch {b}" for b, m in pts)
              + f" ({per:.0f} MiB a sequence); at the predicted batch "
              + (f"{fit['batch']}: finished, peak RSS {fit['peak_rss_mb']:.0f} MiB" if fit else "(no run, or it failed)"))
for a, b in (("meshtrain-flash", "torch-compile"), ("meshtrain-flash", "torch-eager"),
             ("meshtrain-flash", "meshtrain-probabilities"), ("meshtrain-dp2", "torch-ddp2-compile"),
             ("meshtrain-dp2", "torch-ddp2")):
    ratio(a, b)
PY
