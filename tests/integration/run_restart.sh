# `meshtrain run` survives a worker killed with SIGKILL: the supervisor stops
# the other worker, restarts the whole group, and the workers resume from the
# newest complete checkpoint (run always passes --resume). The final
# parameters are bitwise those of an uninterrupted run of the same command,
# and running the command again after the end only reports "already finished".
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
ARGS=(--nproc 2 --parallel.data=allreduce --checkpoint.every=5 --checkpoint.keep=5 --training.steps=20
      "${CHAOS_MODEL[@]}")

# params OUT_DIR FILE: the final checkpoint's parameters in one file, whether
# it was written whole (model.safetensors) or sharded (shard-*.safetensors).
params() {
  local ckpt="$1/checkpoints/step_00000020"
  [ -d "$ckpt" ] || fail "no final checkpoint in $1"
  if grep -q "^  consolidate" <<< "$("$MESHTRAIN" --help)"; then
    "$MESHTRAIN" consolidate "$ckpt" "$2" > /dev/null || fail "consolidate $ckpt"
  else
    cp "$ckpt/model.safetensors" "$2"
  fi
}

start=$(date +%s)
"$MESHTRAIN" run job.toml "${ARGS[@]}" --training.out_dir="$WORK/straight" > straight.txt 2>&1 ||
  { cat straight.txt; fail "uninterrupted run"; }

"$MESHTRAIN" run job.toml "${ARGS[@]}" --training.out_dir="$WORK/killed" > killed.txt 2>&1 &
run_pid=$!
# grep, not Python: the poll must stay cheap while the workers take both cores.
reached_7() { grep -Eqs '"step":([7-9]|1[0-9]|20)[,}]' "$WORK/killed/metrics.jsonl"; }
for _ in $(seq 1200); do
  reached_7 && break
  sleep 0.02
done
reached_7 || { cat killed.txt; fail "the run did not reach step 7"; }
# Worker 1: the process with this out_dir and RANK=1 (`meshtrain run` itself has no RANK).
victim=$(pgrep -f -- "--training.out_dir=$WORK/killed" | while read -r pid; do
  if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "RANK=1"; then echo "$pid"; fi; done | head -n 1 || true)
[ -n "$victim" ] || { cat killed.txt; fail "could not find worker 1"; }
killed_at=$(latest_step "$WORK/killed/metrics.jsonl")
kill -9 "$victim"
wait "$run_pid" || { cat killed.txt; fail "the job failed after a worker died"; }
[ "$killed_at" -lt 20 ] || { cat killed.txt; fail "worker 1 was killed after the last step ($killed_at): too late to test"; }

grep -q "^\[run\] worker 1 killed by signal 9 (Killed); stopping the others to restart the whole job" killed.txt ||
  { cat killed.txt; fail "no group restart after worker 1's death"; }
grep -q "^\[run\] restarting the whole job in 0.2 s (restart 1 of 3)" killed.txt || { cat killed.txt; fail "no restart line"; }
grep -q "^\[worker 0\] resuming from step [1-9]" killed.txt || { cat killed.txt; fail "the restarted workers did not resume from a checkpoint"; }

params "$WORK/straight" straight.safetensors
params "$WORK/killed" killed.safetensors
cmp straight.safetensors killed.safetensors ||
  fail "parameters differ between the uninterrupted and the restarted run"

# The same command again: the job is finished, nothing changes.
"$MESHTRAIN" run job.toml "${ARGS[@]}" --training.out_dir="$WORK/killed" > again.txt 2>&1 ||
  { cat again.txt; fail "running a finished job again"; }
grep -q "already finished: step 20 of 20" again.txt || { cat again.txt; fail "no 'already finished'"; }
params "$WORK/killed" again.safetensors
cmp straight.safetensors again.safetensors || fail "running a finished job again changed it"
echo "run restart ok: worker 1 killed at step $killed_at; $(( $(date +%s) - start )) s"
