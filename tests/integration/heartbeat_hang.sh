# A hung worker (SIGSTOP: alive, silent) under `meshtrain run` with
# parallel.heartbeat_timeout_s = 2: its heartbeat file goes stale, the
# supervisor kills it (the flight recorder's rings name it, not worker 0
# that waits for it), restarts the whole job, and the job ends bitwise where
# an uninterrupted run does. Without heartbeats the other worker would wait
# in its all-reduce for parallel.timeout_s (here 300 s).
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
args=(--nproc 2 --parallel.data=allreduce --checkpoint.every=4 --checkpoint.keep=5 --training.steps=20
      "${CHAOS_MODEL[@]}" --parallel.heartbeat_timeout_s=2 --parallel.timeout_s=300)
"$MESHTRAIN" run job.toml "${args[@]}" --training.out_dir="$WORK/straight" > straight.txt 2>&1 ||
  { cat straight.txt; fail "uninterrupted run"; }

start=$(date +%s)
"$MESHTRAIN" run job.toml "${args[@]}" --training.out_dir="$WORK/hung" > hung.txt 2>&1 &
run_pid=$!
while kill -0 "$run_pid" 2> /dev/null && ! reached "$WORK/hung/metrics.jsonl" 7; do sleep 0.05; done
victim=$(worker_pid "$run_pid" 1)
[ -n "$victim" ] || { cat hung.txt; fail "no worker 1 to hang"; }
kill -STOP "$victim"
wait "$run_pid" || { cat hung.txt; fail "the job failed after worker 1 hung"; }
elapsed=$(( $(date +%s) - start ))
# Worker 0 waits for worker 1 in a collective and stops beating at the same
# moment, so either may be found stale first; the rings name worker 1, and
# it is the one killed.
grep -q "worker 1 is the hang's culprit (worker [01] sent no heartbeat for .* (parallel.heartbeat_timeout_s 2 s); the flight recorder names rank 1); killed it" hung.txt ||
  { cat hung.txt; fail "worker 1 was not killed as the hang's culprit"; }
if grep -q "^\[run\] worker 0 sent no heartbeat" hung.txt; then cat hung.txt; fail "the waiting worker 0 was killed"; fi
grep -q "restarting the whole job" hung.txt || { cat hung.txt; fail "no restart"; }
[ "$elapsed" -lt 120 ] || fail "the hang took $elapsed s to resolve"
final_params "$WORK/straight" 20 straight.safetensors
final_params "$WORK/hung" 20 hung.safetensors
cmp straight.safetensors hung.safetensors || fail "parameters differ from the uninterrupted run"
echo "heartbeat: a hung worker was killed and the job recovered bitwise in $elapsed s"
