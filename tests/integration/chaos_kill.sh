# Chaos: `meshtrain run` jobs that lose a process to kill -9 at a random step
# complete, and their final parameters are bitwise those of an uninterrupted
# run of the same command (the supervisor restarts the whole job, which
# resumes from its newest complete, asynchronously written checkpoint):
#   - a random worker of a data-parallel job,
#   - the primary (rank 0),
#   - a random worker of a ZeRO stage 3 job (sharded checkpoints), in fp32 and in bf16,
#   - the reducer of a Reduction Server job,
#   - a tensor rank of a tensor-parallel job (one shard file per tensor rank),
#   - a random worker of a data-parallel job on the guarded device,
#   - a middle stage of a 4-stage pipeline (one file per stage).
# The random choices print their seed; CHAOS_SEED=N replays one.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
seed=${CHAOS_SEED:-$RANDOM}
RANDOM=$seed
echo "chaos seed $seed"
base=(--parallel.data=allreduce --checkpoint.every=4 --checkpoint.keep=5 --training.steps=20
      "${CHAOS_MODEL[@]}")

# chaos NAME VICTIM_RANK [ARGS...]: the job (of $NPROC workers, 2 unless
# set) once straight, once with the process of RANK=VICTIM_RANK killed at a
# random step; same final bits.
chaos() {
  local name=$1 victim_rank=$2
  shift 2
  local args=(--nproc "${NPROC:-2}" "${base[@]}" "$@")
  "$MESHTRAIN" run job.toml "${args[@]}" --training.out_dir="$WORK/$name-straight" > "$name-straight.txt" 2>&1 ||
    { cat "$name-straight.txt"; fail "$name: uninterrupted run"; }
  local at=$((3 + RANDOM % 8))  # steps 3-10 of 20: leaves the kill time to land under load
  "$MESHTRAIN" run job.toml "${args[@]}" --training.out_dir="$WORK/$name" > "$name.txt" 2>&1 &
  local run_pid=$!
  local killed_at
  killed_at=$(kill_at "$run_pid" "$WORK/$name/metrics.jsonl" "$at" "$victim_rank") || { cat "$name.txt"; exit 1; }
  wait "$run_pid" || { cat "$name.txt"; fail "$name: the job failed after rank $victim_rank died"; }
  # The supervisor may hear first of the victim's death or of a neighbour's
  # failed exchange with it (a pipeline stage notices at once).
  grep -q -E "(killed by signal 9 \(Killed\)|exited with status [0-9]+); stopping the others to restart the whole job" \
    "$name.txt" && grep -q "restarting the whole job" "$name.txt" ||
    { cat "$name.txt"; fail "$name: no restart after the kill"; }
  final_params "$WORK/$name-straight" 20 "$name-straight.safetensors"
  final_params "$WORK/$name" 20 "$name.safetensors"
  cmp "$name-straight.safetensors" "$name.safetensors" || fail "$name: parameters differ from the uninterrupted run"
  echo "== $name: rank $victim_rank killed after step $killed_at; restarted and resumed to the same bits"
}

chaos worker $((RANDOM % 2))
chaos primary 0
chaos zero3 $((RANDOM % 2)) --parallel.zero_stage=3
chaos zero3-bf16 $((RANDOM % 2)) --parallel.zero_stage=3 --training.precision=bf16
# Workers are ranks 0-1, the reducer rank 2.
chaos reducer 2 --parallel.all_reduce=reduction_server --parallel.reducers=1
chaos tensor $((RANDOM % 2)) --parallel.tensor=2
# The same on the guarded device: its collectives staged through host memory (docs/gpu.md), its
# checkpoints downloaded from it and the restart's uploaded to it.
chaos device $((RANDOM % 2)) --training.device=cpu-guarded
# Stages 1 or 2 of 0-3; data = "none": the 4 workers are one pipeline. Each
# stage holds a quarter of the model, so it is twice as wide as the others'
# for its steps (~0.1 s) to leave a kill at step 10 time to land.
NPROC=4 chaos pipeline $((1 + RANDOM % 2)) --parallel.data=none --parallel.pipeline=4 --parallel.micro_batches=4 \
  --parallel.schedule=1f1b --model.n_embd=256
echo "chaos: every kill recovered bitwise"
