#!/usr/bin/env bash
# Chaos: N trials (default 20) of `meshtrain run` jobs that lose one process
# to kill -9 at a random step, across roles and strategies; each trial must
# complete with final parameters bitwise equal to an uninterrupted run of
# the same job. Prints, per trial and in total: passed, whole-job restarts,
# steps lost (killed at step k, resumed from checkpoint c: k - c, summed over
# restarts) and wall-time overhead against the uninterrupted run.
#
# Strategies (picked at random per trial, each uninterrupted once first):
#   dp      2 workers, ring all-reduce          victims: worker 0 (primary) or 1
#   zero3   2 workers, ZeRO stage 3             victims: worker 0 or 1
#   rs      2 workers + 1 reducer               victims: worker 0, 1 or the reducer (rank 2)
#   ps1     1 worker + 2 parameter servers      victims: server 0 or 1 (ranks 1, 2)
#           (one worker: an asynchronous job is deterministic only then)
#   4d      8 workers, dp2 (ep2) x pp2 x tp2, the MoE GPT (4 experts, top-2), 2 micro-batches
#                                               victims: any worker, 0-7
#   ep4tp2  8 workers, dp4 (ep4: one expert each) x tp2, the MoE GPT
#                                               victims: any worker, 0-7
# The tiny GPT of tests/integration (n_embd 128, context 128, batch 8),
# $STEPS steps (default 40), a checkpoint every $EVERY (default 5), restart
# backoff 0.2 s. Runtime: ~4 min for 20 trials. Results: bench/RESULTS.md,
# rows 24-25 (every run: bench/log/08-chaos.md, bench/log/15-chaos-four-axes.md).
#   Usage: bench/chaos.sh [TRIALS]     knobs: SEED, STEPS, EVERY, MESHTRAIN, OUT [bench/out/chaos],
#          STRATEGIES [dp zero3 rs ps1 4d ep4tp2] (drawn from at random)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
TRIALS="${1:-20}" STEPS="${STEPS:-40}" EVERY="${EVERY:-5}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
WORK="${OUT:-$root/bench/out/chaos}"
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; return 1; }
source tests/integration/chaos_lib.sh
SEED="${SEED:-$RANDOM}"
RANDOM=$SEED
echo "chaos: $(date -u +%Y-%m-%dT%H:%M:%SZ), $TRIALS trials, seed $SEED, $STEPS steps, checkpoint every $EVERY"

head -c 100000 "${TEXT:-data/kjv.txt}" > "$WORK/text.txt" 2> /dev/null || python3 -c "
import random; r = random.Random(7); w = 'and the lord said unto him behold'.split()
open('$WORK/text.txt', 'w').write(' '.join(r.choice(w) for _ in range(20000)))"
cat > "$WORK/job.toml" <<TOML
[model]
kind = "gpt"
n_layer = 2
n_embd = 128
n_head = 2
block_size = 128
[data]
path = "$WORK/text.txt"
val_fraction = 0.1
[training]
batch_size = 8
steps = $STEPS
log_every = 1
eval_every = 0
eval_batches = 2
threads = 1
[checkpoint]
every = $EVERY
keep = 3
[parallel]
data = "allreduce"
workers = 2
restart_backoff_s = 0.2
TOML

strategy_args() {
  case "$1" in
    dp) echo "" ;;
    zero3) echo "--parallel.zero_stage=3" ;;
    rs) echo "--parallel.all_reduce=reduction_server --parallel.reducers=1" ;;
    ps1) echo "--nproc 1 --parallel.data=parameter_server --parallel.servers=2" ;;
    4d) echo "--parallel.workers=8 --parallel.tensor=2 --parallel.pipeline=2 --parallel.expert=2 --parallel.micro_batches=2
              --model.n_expert=4 --model.top_k=2" ;;
    ep4tp2) echo "--parallel.workers=8 --parallel.tensor=2 --parallel.expert=4 --model.n_expert=4 --model.top_k=2" ;;
  esac
}
read -r -a strategies <<< "${STRATEGIES:-dp zero3 rs ps1 4d ep4tp2}"
declare -A straight_s
for s in "${strategies[@]}"; do
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046
  "$MESHTRAIN" run "$WORK/job.toml" $(strategy_args "$s") --training.out_dir="$WORK/straight-$s" \
    > "$WORK/straight-$s.txt" 2>&1 || { tail "$WORK/straight-$s.txt"; echo "uninterrupted $s failed"; exit 1; }
  straight_s[$s]=$(python3 -c "import time; print(time.time() - $t0)")
  final_params "$WORK/straight-$s" "$STEPS" "$WORK/straight-$s.safetensors"
done

passed=0 restarts=0 lost=0 overhead_sum=0 missed=0 trial=0
echo "| trial | strategy | victim | killed at step | passed | restarts | steps lost | wall overhead |"
echo "|---|---|---|---|---|---|---|---|"
# A kill that finds its victim gone (the job ended first) is a missed
# trial, not a failure: another is drawn, up to TRIALS more.
while [ "$trial" -lt "$TRIALS" ] && [ "$missed" -lt "$TRIALS" ]; do
  trial=$((trial + 1))
  s=${strategies[$((RANDOM % ${#strategies[@]}))]}
  victims=2; [ "$s" = rs ] && victims=3
  case "$s" in 4d | ep4tp2) victims=8 ;; esac
  rank=$((RANDOM % victims))
  watch=metrics.jsonl
  [ "$s" = ps1 ] && rank=$((1 + RANDOM % 2)) watch=server-0.jsonl  # the worker logs clocks, servers steps
  at=$((2 + RANDOM % (STEPS - 10)))  # leaves the kill time to land before the end
  out="$WORK/trial-$trial"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046
  "$MESHTRAIN" run "$WORK/job.toml" $(strategy_args "$s") --training.out_dir="$out" > "$out.txt" 2>&1 &
  run_pid=$!
  ok=1
  if ! killed=$(kill_at "$run_pid" "$out/$watch" "$at" "$rank" 2> "$out.kill"); then
    wait "$run_pid"
    echo "| $trial | $s | rank $rank | missed: $(cat "$out.kill") | | | | |"
    missed=$((missed + 1)) trial=$((trial - 1))
    continue
  fi
  wait "$run_pid" || ok=0
  wall=$(python3 -c "import time; print(time.time() - $t0)")
  if [ $ok = 1 ]; then
    final_params "$out" "$STEPS" "$out.safetensors" && cmp -s "$out.safetensors" "$WORK/straight-$s.safetensors" || ok=0
  fi
  r=$(grep -c "restarting the whole job" "$out.txt")
  # Steps lost: the step logged when the kill landed minus the step resumed from.
  l=$(python3 - "$out.txt" "${killed:-0}" <<'PY'
import re, sys
log = open(sys.argv[1]).read()
resumed = [int(m) for m in re.findall(r"\[(?:worker|server) 0\] (?:ps-server 0: )?resuming from step (\d+)", log)]
print(max(0, int(sys.argv[2]) - resumed[0]) if resumed else (int(sys.argv[2]) if "restarting" in log else 0))
PY
)
  o=$(python3 -c "print(f'{$wall / ${straight_s[$s]} - 1:+.0%}')")
  name="worker $rank"
  [ "$s" = rs ] && [ "$rank" = 2 ] && name=reducer
  [ "$s" = ps1 ] && name="server $((rank - 1))"
  echo "| $trial | $s | $name | ${killed:-none} | $([ $ok = 1 ] && echo yes || echo NO) | $r | $l | $o |"
  passed=$((passed + ok)) restarts=$((restarts + r)) lost=$((lost + l))
  overhead_sum=$(python3 -c "print($overhead_sum + $wall / ${straight_s[$s]} - 1)")
done
echo
echo "trials passed: $passed of $TRIALS (bitwise-equal final parameters); whole-job restarts: $restarts;" \
     "steps lost: $lost; mean wall-time overhead: $(python3 -c "print(f'{$overhead_sum / $TRIALS:+.0%}')");" \
     "missed kills (the job ended first, redrawn): $missed"
[ "$passed" = "$TRIALS" ]
