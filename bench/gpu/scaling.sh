#!/usr/bin/env bash
# Data-parallel scaling on one machine's GPUs (issue 37's benchmark, for a machine with several;
# the device tool lends one, so no session has run it yet): GPT-2 124M's shape in bf16, batch B a
# GPU, on 1, 2, 4 and 8 GPUs (as many as there are): meshtrain over NCCL, data parallelism and
# ZeRO-3, against PyTorch's DDP and FSDP2 (torch.compile) under torchrun, the same batch a GPU.
# One JSON line a point: tokens/s (the whole job's), scaling efficiency (the rate over n times
# the same system's one-GPU rate) and, for meshtrain, the share of its gradient communication
# hidden behind backward (comm_hidden_share, from the device's events over NCCL: median of the step
# records), each beside `plan --config`'s forecast of the same job (its step and hidden share): the
# GPU calibration of the forecast.
#   bench/gpu/scaling.sh MESHTRAIN TOKENS.bin OUT_DIR [B]
set -euo pipefail
meshtrain=$1 tokens=$2 out=$3 batch=${4:-16}
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
gpus=$(nvidia-smi -L | grep -c '^GPU ')
mkdir -p "$out"
counts=(1); for n in 2 4 8; do [ "$n" -le "$gpus" ] && counts+=("$n"); done

meshtrain_point() {  # meshtrain_point NAME N ARGS...: prints the step records' medians as JSON
  local name=$1 n=$2; shift 2
  local job=("$root/examples/gpt-bench-gpt2.toml" --parallel.workers="$n" --training.device=cuda
             --training.batch_size="$batch" --training.steps=20 --training.threads=4 --training.eval_every=0
             --checkpoint.every=0 --data.train_path="$tokens" --data.val_path="$tokens"
             --training.out_dir="$out/$name" "$@")
  # The planner's forecast of the same job first: its step and the share of the data-parallel
  # collectives it expects to hide (data_parallel_comm.hpp), beside what the run measures.
  "$meshtrain" plan --config "${job[@]}" --json > "$out/$name.plan.json" 2> "$out/$name.plan.log" ||
    echo '{}' > "$out/$name.plan.json"
  "$meshtrain" launch --nproc "$n" -- "$meshtrain" train "${job[@]}" > "$out/$name.log" 2>&1
  "$python" - "$out/$name/metrics.jsonl" "$name" "$n" "$out/$name.plan.json" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "tokens_per_s" in r and r.get("step", 0) > 3]
point = {"system": sys.argv[2].rsplit("-", 1)[0], "gpus": int(sys.argv[3]),
         "tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in steps), 1),
         "step_ms": round(statistics.median(r["step_ms"] for r in steps), 2)}
hidden = [r["comm_hidden_share"] for r in steps if "comm_hidden_share" in r]
if hidden:
    point["comm_hidden"] = round(statistics.median(hidden), 3)
plan = json.load(open(sys.argv[4])).get("step_s")
if plan:
    point["forecast_step_ms"] = round(plan["total"] * 1e3, 2)
    if plan["communication"] > 0:
        point["forecast_comm_hidden"] = round(plan["communication_hidden"] / plan["communication"], 3)
print(json.dumps(point))
PY
}
torch_point() {  # torch_point NAME N PARALLEL
  local name=$1 n=$2 parallel=$3
  torchrun --standalone --nproc_per_node "$n" "$root/bench/gpu/torch_gpt2.py" --mode compile --batch "$batch" \
    --parallel "$parallel" 2> "$out/$name.log" | tail -n 1 |
    "$python" -c 'import json, sys; r = json.loads(sys.stdin.read())
print(json.dumps({"system": sys.argv[1], "gpus": int(sys.argv[2]), "tokens_per_s": r["tokens_per_s"]}))' \
      "${name%-*}" "$n"
}

points=$out/points.jsonl
: > "$points"
for n in "${counts[@]}"; do
  meshtrain_point "meshtrain-dp-$n" "$n" --parallel.data=allreduce --parallel.device_collectives=nccl >> "$points"
  meshtrain_point "meshtrain-zero3-$n" "$n" --parallel.data=allreduce --parallel.zero_stage=3 \
    --parallel.device_collectives=nccl >> "$points"
  torch_point "torch-ddp-$n" "$n" ddp >> "$points"
  torch_point "torch-fsdp2-$n" "$n" fsdp2 >> "$points"
done
"$python" - "$points" <<'PY'
import json, sys
points = [json.loads(l) for l in open(sys.argv[1])]
one = {p["system"]: p["tokens_per_s"] for p in points if p["gpus"] == 1}
for p in points:
    p["scaling_efficiency"] = round(p["tokens_per_s"] / (p["gpus"] * one[p["system"]]), 3)
    print(json.dumps(p))
PY
