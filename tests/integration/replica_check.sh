# Silent data corruption (training.check_replicas_every): one worker's
# parameters get one flipped bit after step 10 (the MESHTRAIN_FAULT testing
# knob); the check at step 10 stops the job naming the tensor and, with
# three replicas, the worker that differs. Clean runs with a check every
# step (DP, and DP x TP on 4 workers) raise nothing and train as without it.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
ARGS=(--parallel.data=allreduce --training.steps=16 --training.eval_every=0 --parallel.max_restarts=0)

rc=0
MESHTRAIN_FAULT="flip_bit:rank=1:step=10" "$MESHTRAIN" run job.toml --nproc 3 "${ARGS[@]}" \
  --training.check_replicas_every=5 --training.out_dir="$WORK/flip3" > flip3.txt 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat flip3.txt; fail "a corrupted replica exited with status $rc, expected 1"; }
grep -q "step 10: silent data corruption (training.check_replicas_every): worker(s) 1 differ from their replicas in [a-z_.0-9]*" flip3.txt ||
  { cat flip3.txt; fail "three replicas: worker 1 not named"; }

rc=0
MESHTRAIN_FAULT="flip_bit:rank=0:step=10" "$MESHTRAIN" run job.toml --nproc 2 "${ARGS[@]}" \
  --training.check_replicas_every=5 --training.out_dir="$WORK/flip2" > flip2.txt 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat flip2.txt; fail "two replicas: exit status $rc"; }
grep -q "silent data corruption .*worker(s) 0, 1 differ" flip2.txt || { cat flip2.txt; fail "two replicas: not named"; }

"$MESHTRAIN" run job.toml --nproc 2 "${ARGS[@]}" --training.check_replicas_every=1 \
  --training.out_dir="$WORK/clean" > clean.txt 2>&1 || { cat clean.txt; fail "a clean checked run failed"; }
"$MESHTRAIN" run job.toml --nproc 2 "${ARGS[@]}" --training.out_dir="$WORK/plain" > plain.txt 2>&1 ||
  { cat plain.txt; fail "the plain run failed"; }
final_params "$WORK/clean" 16 clean.safetensors
final_params "$WORK/plain" 16 plain.safetensors
cmp -s clean.safetensors plain.safetensors || fail "the check changed the training"
"$MESHTRAIN" run job.toml --nproc 4 "${ARGS[@]}" --parallel.tensor=2 --training.check_replicas_every=1 \
  --training.out_dir="$WORK/tp" > tp.txt 2>&1 || { cat tp.txt; fail "a clean checked DP x TP run failed"; }
rc=0
"$MESHTRAIN" train job.toml --training.check_replicas_every=2 --parallel.data=allreduce --parallel.zero_stage=3 \
  --training.out_dir="$WORK/z3" > z3.txt 2>&1 || rc=$?
[ "$rc" -eq 3 ] && grep -q "ZeRO-3 keeps no replicas" z3.txt || { cat z3.txt; fail "ZeRO-3 with the check: status $rc"; }
echo "replica check: a flipped bit named (worker 1 of 3; both of 2), clean runs unchanged, ZeRO-3 refused"
