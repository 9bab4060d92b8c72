# Preemption under `meshtrain run`: SIGTERM (or SIGUSR1) at a random step,
# to the supervisor or straight to one worker, in every synchronous layout
# (DP, ZeRO-3, TP, PP over TCP, EP, the Reduction Server, and DP x TP on 4
# ranks). Every worker finishes its step,
# they agree on one step, the checkpoint of that step is committed within the
# grace and the job exits with status 4 (preempted, not a failure). Started
# again, it resumes and ends bitwise where an uninterrupted run ends.
# Checkpoints are asynchronous and taken every step in one case, so a save is
# in flight when the signal lands.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
STEPS=24
COMMON=("${CHAOS_MODEL[@]}" --training.steps=$STEPS --checkpoint.keep=3 --parallel.stop_grace_s=60)
RANDOM=$$

# newest_complete OUT_DIR: the step of the newest checkpoint with its manifest.
newest_complete() {
  local best=-1 d
  for d in "$1"/checkpoints/step_*; do
    [ -f "$d/MANIFEST.json" ] || [ -f "$d/model.safetensors" ] || continue
    best=$((10#${d##*step_}))
  done
  echo "$best"
}

# preempt NAME TARGET SIGNAL LAYOUT...: the straight run, then one that gets
# SIGNAL at a random step (TARGET: "supervisor" or a worker's RANK), then its
# resumption; compares the final parameters.
preempt() {
  local name=$1 target=$2 sig=$3; shift 3
  local args=("$@" "${COMMON[@]}")
  "$MESHTRAIN" run job.toml "${args[@]}" --training.out_dir="$WORK/$name-straight" > "$name-straight.txt" 2>&1 ||
    { cat "$name-straight.txt"; fail "$name: uninterrupted run"; }
  local at=$((3 + RANDOM % 14))
  "$MESHTRAIN" run job.toml "${args[@]}" --training.out_dir="$WORK/$name" > "$name.txt" 2>&1 &
  local run_pid=$! victim pid
  while kill -0 "$run_pid" 2> /dev/null && ! reached "$WORK/$name/metrics.jsonl" "$at"; do sleep 0.05; done
  if [ "$target" = supervisor ]; then
    victim=$run_pid
  else
    victim=$(worker_pid "$run_pid" "$target")
  fi
  [ -n "${victim:-}" ] || { cat "$name.txt"; fail "$name: no process to signal"; }
  local signalled_at; signalled_at=$(latest_step "$WORK/$name/metrics.jsonl")
  local t0; t0=$(date +%s)
  kill -"$sig" "$victim"
  local rc=0
  wait "$run_pid" || rc=$?
  local took=$(( $(date +%s) - t0 ))
  [ "$rc" -eq 4 ] || { cat "$name.txt"; fail "$name: exit status $rc after SIG$sig, expected 4 (preempted)"; }
  grep -q "stopping on SIG$sig (preemption)" "$name.txt" || { cat "$name.txt"; fail "$name: no stop line"; }
  local stopped; stopped=$(newest_complete "$WORK/$name")
  [ "$stopped" -ge "$signalled_at" ] && [ "$stopped" -lt "$STEPS" ] ||
    { cat "$name.txt"; fail "$name: newest checkpoint is step $stopped, signalled at step $signalled_at"; }
  grep -q "preempted (SIG$sig): .* the checkpoint of step $stopped is written" "$name.txt" ||
    { cat "$name.txt"; fail "$name: the lead did not report the checkpoint of step $stopped"; }
  [ "$took" -lt 60 ] || fail "$name: stopping took $took s"
  "$MESHTRAIN" run job.toml "${args[@]}" --training.out_dir="$WORK/$name" > "$name-resumed.txt" 2>&1 ||
    { cat "$name-resumed.txt"; fail "$name: resumed run"; }
  grep -q "resuming from step $stopped" "$name-resumed.txt" || { cat "$name-resumed.txt"; fail "$name: did not resume"; }
  final_params "$WORK/$name-straight" $STEPS "$name-straight.safetensors"
  final_params "$WORK/$name" $STEPS "$name.safetensors"
  cmp -s "$name-straight.safetensors" "$name.safetensors" || fail "$name: parameters differ from the uninterrupted run"
  echo "$name: SIG$sig to $target at step $signalled_at -> all stopped at step $stopped in $took s, resumed bitwise"
}

preempt dp supervisor TERM --nproc 2 --parallel.data=allreduce --checkpoint.every=1
preempt zero3 1 TERM --nproc 2 --parallel.data=allreduce --parallel.zero_stage=3 --checkpoint.every=5
preempt tp supervisor USR1 --nproc 2 --parallel.tensor=2 --checkpoint.every=5
preempt pp-tcp 0 TERM --nproc 2 --parallel.pipeline=2 --parallel.micro_batches=2 --checkpoint.every=5 \
  --parallel.transport=tcp
preempt ep supervisor TERM --nproc 2 --parallel.data=allreduce --model.n_expert=4 --parallel.expert=2 \
  --checkpoint.every=4
preempt reduction-server supervisor TERM --nproc 2 --parallel.data=allreduce --parallel.all_reduce=reduction_server \
  --parallel.reducers=1 --checkpoint.every=5
preempt dp-tp supervisor TERM --nproc 4 --parallel.data=allreduce --parallel.tensor=2 --checkpoint.every=3 \
  --training.batch_size=4

# A second signal exits at once, without waiting for the step in flight (a
# model whose step takes ~3 s here; sooner than 1 s after the first it would be
# the same notice delivered twice), and the newest complete checkpoint stays
# readable.
SLOW=(--model.n_embd=256 --model.n_layer=8 --model.block_size=256 --training.batch_size=16 --training.steps=40
      --training.log_every=1 --training.eval_every=0 --checkpoint.every=1)
"$MESHTRAIN" train job.toml "${SLOW[@]}" --training.out_dir="$WORK/twice" > twice.txt 2>&1 &
train_pid=$!
while kill -0 "$train_pid" 2> /dev/null && ! reached "$WORK/twice/metrics.jsonl" 2; do sleep 0.05; done
kill -TERM "$train_pid"; sleep 1.3; t0=$(date +%s%N)
kill -TERM "$train_pid"
rc=0; wait "$train_pid" || rc=$?
took_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$rc" -eq 143 ] || { cat twice.txt; fail "twice: exit status $rc after two signals, expected 143"; }
grep -q "second stop signal: exiting now" twice.txt || { cat twice.txt; fail "twice: no message"; }
[ "$took_ms" -lt 1000 ] || fail "twice: the second signal took $took_ms ms to end the process"
kept=$(newest_complete "$WORK/twice")
[ "$kept" -ge 1 ] || { cat twice.txt; fail "twice: no complete checkpoint left"; }
final_params "$WORK/twice" "$kept" twice.safetensors
echo "twice: the second signal ended the process in $took_ms ms; checkpoint $kept intact"
echo "preemption: every layout stopped at one step, checkpointed and resumed bitwise"
