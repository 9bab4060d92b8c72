#!/usr/bin/env bash
# One GPU, the host-staged path's cost (issue 37's report; a test path, not
# a speed path): GPT-2 124M's shape in bf16, one worker with batch 2B
# against two workers sharing cuda:0 with batch B each (the same global
# batch), whose gradients go down to host memory, through the shared-memory
# all-reduce and back up every step (docs/gpu.md). Prints the two rates and
# their ratio as a JSON line (the device check's summary reads it). A
# worker's training.batch_size is its own share of the global batch.
#   bench/gpu/staged_overhead.sh MESHTRAIN TOKENS.bin OUT_DIR [B]
set -euo pipefail
meshtrain=$1 tokens=$2 out=$3 batch=${4:-4}
root=$(cd "$(dirname "$0")/../.." && pwd)
common=(--training.device=cuda:0 --training.steps=8 --training.log_every=1 --training.threads=4
        --data.train_path="$tokens" --data.val_path="$tokens" --training.eval_every=0 --checkpoint.every=0)
"$meshtrain" train "$root/examples/gpt-bench-gpt2.toml" "${common[@]}" --training.batch_size=$((2 * batch)) \
  --training.out_dir="$out/one" > "$out/one.log" 2>&1
"$meshtrain" launch --nproc 2 -- "$meshtrain" train "$root/examples/gpt-bench-gpt2.toml" "${common[@]}" \
  --parallel.workers=2 --parallel.data=allreduce --parallel.timeout_s=120 --training.batch_size="$batch" \
  --training.out_dir="$out/staged" > "$out/staged.log" 2>&1
"${PYTHON:-python3}" - "$out/one/metrics.jsonl" "$out/staged/metrics.jsonl" "$batch" <<'PY'
import json, statistics, sys
def rate(path):  # global tokens/s, median of steps 4-8 (rank 0's records)
    rows = [json.loads(l) for l in open(path)]
    return statistics.median(r["tokens_per_s"] for r in rows if "tokens_per_s" in r and r.get("step", 0) >= 4)
one, staged = rate(sys.argv[1]), rate(sys.argv[2])
print(json.dumps({"one_worker_batch": 2 * int(sys.argv[3]), "one_worker_tokens_per_s": round(one, 1),
                  "two_staged_workers_tokens_per_s": round(staged, 1), "staged_over_one": round(staged / one, 3)}))
PY
