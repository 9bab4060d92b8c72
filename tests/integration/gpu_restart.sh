# On one GPU (skipped with the reason where none is usable): four workers sharing it (2 data x
# 2 tensor ways, their collectives staged through host memory) train as one GPU process does on
# the same global batch (fp32 losses within 1e-3); and a job of two workers sharing it loses one
# to kill -9 mid-run: `meshtrain run` restarts the whole job, which resumes from its newest
# checkpoint on the GPU to the bits of an uninterrupted run. scripts/gpu-check.sh runs it last,
# in the time its other stages leave.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
status=0
"$MESHTRAIN" train job.toml --training.device=cuda --training.steps=1 --schedule.warmup_steps=0 \
  --training.out_dir="$WORK/probe" \
  > probe.log 2>&1 || status=$?
if [ "$status" -eq 3 ] && grep -q "no usable GPU\|built without CUDA" probe.log; then
  echo "SKIP: $(grep -m 1 -o 'no usable GPU.*\|this meshtrain was built without CUDA.*' probe.log)"; exit 77
fi
[ "$status" -eq 0 ] || { cat probe.log; fail "one step on the GPU: exit status $status"; }

common=(--training.device=cuda:0 --training.precision=fp32 --training.log_every=1 --parallel.timeout_s=60)
"$MESHTRAIN" train job.toml "${common[@]}" --training.out_dir="$WORK/one" > one.log 2>&1 ||
  { cat one.log; fail "one GPU process"; }
# training.batch_size is a worker's: 2 on each of the 2 data ways, one process's 4.
"$MESHTRAIN" launch --nproc 4 -- "$MESHTRAIN" train job.toml --parallel.workers=4 --parallel.data=allreduce \
  --parallel.tensor=2 --training.batch_size=2 "${common[@]}" --training.out_dir="$WORK/four" > four.log 2>&1 ||
  { cat four.log; fail "four workers sharing the GPU"; }
compare_losses "$WORK/one/metrics.jsonl" "$WORK/four/metrics.jsonl" 1e-3 ||
  fail "2 x 2 workers sharing the GPU: losses differ from one GPU process's"
echo "four workers sharing the GPU (2 data x 2 tensor, host-staged) train as one GPU process does"

# 120 steps: on a GPU a step of the chaos model takes milliseconds, and the kill (polled every
# 50 ms) must land before the end.
killed_at=$(killed_same_bits gpu-kill 120 6 1 --nproc 2 --parallel.data=allreduce "${common[@]}" --checkpoint.every=4 \
  --checkpoint.keep=5 --training.steps=120 "${CHAOS_MODEL[@]}") || exit 1
echo "worker 1 killed with -9 after step $killed_at on the GPU: restarted, resumed to the same bits"
