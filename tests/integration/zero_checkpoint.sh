# ZeRO checkpoints reshard: every worker writes its shard, and a checkpoint
# written at one stage and worker count resumes at another with the same
# global batch, continuing the same numbers (losses and final parameters
# within 1e-5 of an uninterrupted run):
#   stage 3 on 4 workers -> one process (stage 0), and back;
#   stage 3 on 4 workers -> stage 2 on 2 workers;
#   plain data parallelism, 2 workers -> 4.
# A checkpoint that lost a shard is refused, naming the shard.
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
common=(--training.log_every=1 --checkpoint.every=10 --parallel.timeout_s=60)

# job NAME NPROC STAGE BATCH CKPT_DIR [ARGS...]: global batch NPROC * BATCH = 16
job() {
  local name=$1 n=$2 stage=$3 batch=$4 ckpt=$5
  shift 5
  local cmd=("$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size="$batch"
             --training.out_dir="$WORK/$name" --checkpoint.dir="$ckpt" "$@")
  if [ "$n" -gt 1 ]; then
    cmd=("$MESHTRAIN" launch --nproc "$n" -- "${cmd[@]}" --parallel.data=allreduce --parallel.zero_stage="$stage")
  fi
  "${cmd[@]}" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
}

# continues NAME: its steps (11-20) have the reference's losses, and its
# final parameters the reference's
continues() {
  python3 - "$WORK/reference/metrics.jsonl" "$WORK/$1/metrics.jsonl" <<'PY' || fail "$1: losses differ after resuming"
import json, sys
ref = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r}
got = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2])) if "loss" in r}
assert sorted(got) == list(range(11, 21)), sorted(got)
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in got)
print(f"steps 11-20: worst relative loss difference {worst:.3g}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
  "$MESHTRAIN" consolidate "$2/step_00000020" "$WORK/$1.safetensors" > /dev/null || fail "$1: consolidate"
  compare_params "$WORK/reference/checkpoints/step_00000020/model.safetensors" "$WORK/$1.safetensors" 1e-5 ||
    fail "$1: parameters differ"
}

job reference 1 0 16 "$WORK/reference/checkpoints"

# Stage 3 on 4 workers, stopped at step 10, resumed by one process.
job z3-first-half 4 3 4 "$WORK/ck-a" --stop-at-step=10
ls "$WORK/ck-a/step_00000010" | grep -c '^shard-0000[0-3]-of-00004.safetensors$' | grep -qx 4 ||
  { ls "$WORK/ck-a/step_00000010"; fail "expected 4 shard files"; }
job one-process 1 0 16 "$WORK/ck-a" --resume
grep -q "resuming from step 10" one-process.log || { cat one-process.log; fail "did not resume at step 10"; }
continues one-process "$WORK/ck-a"

# One process stopped at step 10, resumed by 4 workers at stage 3.
job single-first-half 1 0 16 "$WORK/ck-b" --stop-at-step=10
job z3-resumed 4 3 4 "$WORK/ck-b" --resume
continues z3-resumed "$WORK/ck-b"

# Stage 3 on 4 workers resumed at stage 2 on 2 workers.
job z3-again 4 3 4 "$WORK/ck-c" --stop-at-step=10
job z2-resumed 2 2 8 "$WORK/ck-c" --resume
continues z2-resumed "$WORK/ck-c"

# Plain data parallelism (every worker writes its split too): 2 -> 4 workers.
job dp2-first-half 2 0 8 "$WORK/ck-e" --stop-at-step=10
job dp4-resumed 4 0 4 "$WORK/ck-e" --resume
continues dp4-resumed "$WORK/ck-e"

# A checkpoint that lost a shard is never loaded: the manifest lists every
# shard, so the loss is named and the checkpoint skipped.
cp -r "$WORK/ck-c" "$WORK/ck-d"
rm -r "$WORK/ck-d/step_00000020"
rm "$WORK/ck-d/step_00000010/shard-00002-of-00004.safetensors"
if "$MESHTRAIN" consolidate "$WORK/ck-d" "$WORK/x.safetensors" > broken.log 2>&1; then
  fail "a checkpoint without one of its shards loaded"
fi
grep -q "shard-00002-of-00004" broken.log || { cat broken.log; fail "the error does not name the missing shard"; }
echo "ZeRO checkpoints reshard"
