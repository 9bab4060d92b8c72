#!/usr/bin/env bash
# Expert parallelism on this machine: the MoE GPT (config B's shape, L=6 d=384 ctx=256, every block's MLP
# 4 experts, top-2, dropless, the balancing loss on) on 2 processes x 1 thread with parallel.expert = 2
# against one process x 1 thread, the same global batch (8 sequences):
#   meshtrain train examples/gpt-bench-b.toml --training.threads=1 --model.n_expert=4 --model.top_k=2
#   meshtrain launch --nproc 2 --transport shm -- meshtrain train ... --parallel.data=allreduce
#     --parallel.expert=2 --training.batch_size=4
# and beside them the same 2 processes with every expert on each (parallel.expert = 1: plain data
# parallelism, no all-to-all, each rank its own tokens): what 2 processes reach on this machine without
# the experts split. tokens/s = the median over the steps after MT_SKIP of the lead's metrics; the runs
# alternate, ROUNDS rounds, and the ratios are taken within each round. Target: expert 2 >= 1.6x.
# Also printed: the routing's imbalance under expert 2, from the metrics' per-expert loads: the expert rows
# of the busier expert rank over half of all rows, averaged over the MoE layers and the measured steps
# (1.00: balanced). The busier rank sets the step, so expert parallelism's ratio is at most about
# 2 / imbalance on the experts' share of the work.
# The defaults time steps 37-60: the balancing loss evens the routing out within about 40 steps (on
# config B's shape the imbalance falls from 1.26 at initialisation to 1.07), and a training run spends
# its time past that. MT_STEPS=8 MT_SKIP=2 times the routing at initialisation instead.
#
# Knobs: ROUNDS [3]  MT_STEPS [60]  MT_SKIP [36]  EXPERTS [4]  TOP_K [2]  MESHTRAIN [build/src/meshtrain/meshtrain]
#   OUT [bench/out/moe_parallel]  IDLE_WAIT [60] IDLE_PCT [15]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
ROUNDS="${ROUNDS:-3}"
MT_STEPS="${MT_STEPS:-60}"
MT_SKIP="${MT_SKIP:-36}"
EXPERTS="${EXPERTS:-4}"
TOP_K="${TOP_K:-2}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/moe_parallel}"
IDLE_WAIT="${IDLE_WAIT:-60}"
IDLE_PCT="${IDLE_PCT:-15}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT"
source bench/idle.sh
toml=examples/gpt-bench-b.toml
data="$root/data/kjv.txt"
if [ ! -s "$data" ]; then  # the corpus is not prepared: generated English-like text of the same kind
  data="$OUT/text.txt"
  [ -s "$data" ] || python3 - "$data" <<'PY'
import random, sys
random.seed(7)
words = "the of and to in that he shall unto for his i a they be is him not them it with all thou was".split()
open(sys.argv[1], "w").write(" ".join(random.choice(words) for _ in range(400000)))
PY
fi

cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | tr ' ' '\n' |
             grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | paste -sd' ')"
echo "moe_parallel: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(getconf _NPROCESSORS_ONLN) CPUs," \
     "CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); flags: ${cpu_flags:-none};" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; E=$EXPERTS k=$TOP_K, $MT_STEPS steps (first $MT_SKIP skipped)"

common=(--training.threads=1 --training.steps="$MT_STEPS" --training.log_every=1 --training.eval_every=0
        --checkpoint.every=0 --data.path="$data" --model.n_expert="$EXPERTS" --model.top_k="$TOP_K")

# run DIR [command...]: runs it after the CPUs go idle; prints the median tokens/s after MT_SKIP steps
# and the routing imbalance over 2 expert ranks.
run() {
  local dir="$1"
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  wait_idle
  "$@" --training.out_dir="$dir/run" --metrics.path="$dir/metrics.jsonl" > "$dir/log" 2>&1 ||
    { echo "FAILED: ${dir#$root/}/log" >&2; tail -n 3 "$dir/log" >&2; echo 0 0; return; }
  python3 - "$dir/metrics.jsonl" "$MT_SKIP" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l][int(sys.argv[2]):]
imbalance = []
for r in rows:
    for layer in r["moe"]:
        half = len(layer["load"]) // 2
        ranks = [sum(layer["load"][:half]), sum(layer["load"][half:])]
        imbalance.append(max(ranks) / (sum(ranks) / 2))
print(statistics.median(r["tokens_per_s"] for r in rows), statistics.mean(imbalance))
PY
}

ratios=() dp_ratios=()
for round in $(seq 1 "$ROUNDS"); do
  read -r one _ < <(run "$OUT/one-r$round" "$MESHTRAIN" train "$toml" "${common[@]}" --training.batch_size=8)
  read -r ep2 imbalance < <(run "$OUT/ep2-r$round" "$MESHTRAIN" launch --nproc 2 --transport shm -- "$MESHTRAIN" \
        train "$toml" "${common[@]}" --parallel.data=allreduce --parallel.expert=2 --training.batch_size=4)
  read -r dp2 _ < <(run "$OUT/dp2-r$round" "$MESHTRAIN" launch --nproc 2 --transport shm -- "$MESHTRAIN" \
        train "$toml" "${common[@]}" --parallel.data=allreduce --parallel.expert=1 --training.batch_size=4)
  ratio=$(python3 -c "print(f'{$ep2 / $one:.2f}' if $one > 0 else 'n/a')")
  dp_ratio=$(python3 -c "print(f'{$dp2 / $one:.2f}' if $one > 0 else 'n/a')")
  ratios+=("$ratio")
  dp_ratios+=("$dp_ratio")
  printf '  round %d: one process %.0f tok/s; 2 processes, expert 2: %.0f tok/s (%sx, routing imbalance %.2f); ' \
    "$round" "$one" "$ep2" "$ratio" "$imbalance"
  printf 'expert 1: %.0f tok/s (%sx)\n' "$dp2" "$dp_ratio"
done
echo "moe_parallel: 2 processes x 1 thread / one process x 1 thread: expert 2 ${ratios[*]} (target >= 1.6);" \
     "expert 1 (every expert on each) ${dp_ratios[*]}"
