# A parameter server killed with SIGKILL mid-run: `meshtrain run` restarts the
# whole job, every server continues from the newest step that all servers
# checkpointed (<checkpoint.dir>/server-<j>/step_*), the workers rejoin, and
# the job completes with its final checkpoint. With one worker the job is
# deterministic, and the restarted run ends bitwise where an uninterrupted
# one does.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
args=(--nproc 2 --parallel.data=parameter_server --parallel.servers=2 --checkpoint.every=5 --training.steps=80
      "${CHAOS_MODEL[@]}" --training.out_dir="$WORK/ps")
"$MESHTRAIN" run job.toml "${args[@]}" > ps.txt 2>&1 &
run_pid=$!
# Workers are ranks 0-1, servers 2-3: kill server 1 after its step 20.
killed=$(kill_at "$run_pid" "$WORK/ps/server-1.jsonl" 20 3) || { cat ps.txt; exit 1; }
wait "$run_pid" || { cat ps.txt; fail "the job failed after server 1 died"; }
grep -q "killed by signal 9 (Killed); stopping the others to restart the whole job" ps.txt ||
  { cat ps.txt; fail "no restart after the server's death"; }
for j in 0 1; do
  grep -q "^\[server $j\] ps-server $j: resuming from step [1-9][0-9]* " ps.txt ||
    { cat ps.txt; fail "server $j did not resume from its checkpoint"; }
  ls "$WORK/ps/checkpoints/server-$j" | grep -q "^step_" || fail "server $j kept no checkpoint"
done
[ -d "$WORK/ps/checkpoints/step_00000080" ] || { cat ps.txt; fail "no final checkpoint"; }
"$MESHTRAIN" eval "$WORK/ps/checkpoints" --json > eval.json || fail "the final checkpoint does not load"
echo "== 2 workers: server 1 killed after its step $killed; $(cat eval.json)"

# One worker (rank 0), servers ranks 1-2: the same bits as without the kill.
one=(--nproc 1 --parallel.data=parameter_server --parallel.servers=2 --checkpoint.every=5 --checkpoint.keep=5
     --training.steps=60 "${CHAOS_MODEL[@]}")
"$MESHTRAIN" run job.toml "${one[@]}" --training.out_dir="$WORK/one-straight" > one-straight.txt 2>&1 ||
  { cat one-straight.txt; fail "one worker, uninterrupted"; }
"$MESHTRAIN" run job.toml "${one[@]}" --training.out_dir="$WORK/one" > one.txt 2>&1 &
run_pid=$!
killed=$(kill_at "$run_pid" "$WORK/one/server-1.jsonl" 15 2) || { cat one.txt; exit 1; }
wait "$run_pid" || { cat one.txt; fail "one worker: the job failed after server 1 died"; }
grep -q "^\[server 1\] ps-server 1: resuming from step" one.txt || { cat one.txt; fail "one worker: no resume"; }
cmp "$WORK/one-straight/checkpoints/step_00000060/model.safetensors" "$WORK/one/checkpoints/step_00000060/model.safetensors" ||
  fail "one worker: the restarted job ended elsewhere than the uninterrupted one"
echo "== 1 worker: server 1 killed after its step $killed; final parameters bitwise equal"
echo "ps server restart ok"
