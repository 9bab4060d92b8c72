# One job per run directory: while a job trains into training.out_dir, a
# second one there (`meshtrain train`, or `meshtrain run` of a synchronous
# or a parameter-server job) stops at once with exit status 3 (bad input:
# not restarted) naming the first's pid, and the first finishes with every
# step's record in metrics.jsonl once. The lock dies with its holder: after
# the first ended a resumed run takes the directory; and deleting the lock
# file takes it over from a holder that is alive but hung.
source "$(dirname "$0")/lib.sh"
make_text data.txt 100000
tiny_config job.toml data.txt
lock="$WORK/run/.meshtrain.lock"
STEPS=2000
ARGS=(--training.steps=$STEPS --training.batch_size=32 --training.log_every=1 --training.eval_every=500 --checkpoint.every=500)

# The pid the lock file names (empty until a holder wrote it).
holder() { sed -n 's/^pid=//p' "$lock" 2> /dev/null; }
wait_for_holder() {
  for _ in $(seq 3000); do
    [ "$(holder)" = "$1" ] && return 0
    kill -0 "$1" 2> /dev/null || return 1
    sleep 0.01
  done
  return 1
}
# refused WHAT PID COMMAND...: COMMAND must exit 3 within 10 s naming PID as the holder.
refused() {
  local what="$1" pid="$2" status=0 start=$SECONDS
  shift 2
  timeout 60 "$@" > refused.txt 2>&1 || status=$?
  [ "$status" = 3 ] || { cat refused.txt; fail "$what: exit status $status, expected 3"; }
  ((SECONDS - start < 10)) || { cat refused.txt; fail "$what: took $((SECONDS - start)) s to stop"; }
  grep -q "training.out_dir '$WORK/run' is in use by another job: pid $pid on host $(hostname) " refused.txt ||
    { cat refused.txt; fail "$what: the message does not name pid $pid"; }
  grep -q "delete $lock to take the directory over" refused.txt || { cat refused.txt; fail "$what: no way to take over"; }
}

# 1. The first job, and second ones beside it.
"$MESHTRAIN" train job.toml "${ARGS[@]}" > first.log 2>&1 &
first=$!
wait_for_holder "$first" || { cat first.log; fail "the first job did not take the lock"; }
refused "a second train" "$first" "$MESHTRAIN" train job.toml "${ARGS[@]}" --resume
# Under `meshtrain run` the refused worker is not restarted (it could not help).
refused "a second run" "$first" "$MESHTRAIN" run job.toml --nproc 2 --parallel.data=allreduce "${ARGS[@]}"
grep -q "not restarted" refused.txt || { cat refused.txt; fail "run: the refusal is not bad input"; }
grep -q "restarting" refused.txt && { cat refused.txt; fail "run restarted a refused job"; }
refused "a parameter-server run" "$first" "$MESHTRAIN" run job.toml --nproc 2 --parallel.data=parameter_server \
  --parallel.servers=1 "${ARGS[@]}"
kill -0 "$first" 2> /dev/null || fail "the first job ended before the others were refused: too fast to test"
wait "$first" || { cat first.log; fail "the first job failed"; }
grep -q "^done: $STEPS steps" first.log || { cat first.log; fail "the first job did not finish"; }
# Every step's record once: nobody else wrote into its metrics.jsonl.
python3 - "$WORK/run/metrics.jsonl" "$STEPS" <<'PY' || fail "metrics.jsonl is not the first job's alone"
import json, sys
steps = [r["step"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
want = list(range(1, int(sys.argv[2]) + 1))
if steps != want:
    print(f"{len(steps)} step records; missing {sorted(set(want) - set(steps))[:10]}, "
          f"repeated {sorted(s for s in set(steps) if steps.count(s) > 1)[:10]}")
    sys.exit(1)
print(f"metrics.jsonl: steps 1..{want[-1]}, each once")
PY

# 2. The lock died with the first job: a resumed run takes the directory.
"$MESHTRAIN" train job.toml "${ARGS[@]}" --training.steps=$((STEPS + 20)) --resume > resumed.log 2>&1 ||
  { cat resumed.log; fail "the resumed run"; }
grep -q "^resuming from step $STEPS " resumed.log || { cat resumed.log; fail "did not resume from step $STEPS"; }
grep -q "^done: 20 steps" resumed.log || { cat resumed.log; fail "the resumed run did not finish"; }

# 3. A holder alive but hung (stopped): refused until the lock file is
# deleted, which takes the directory over.
"$MESHTRAIN" train job.toml "${ARGS[@]}" --training.steps=100000 --resume > hung.log 2>&1 &
hung=$!
wait_for_holder "$hung" || { cat hung.log; fail "the hung job did not take the lock"; }
kill -STOP "$hung"
refused "beside a hung job" "$hung" "$MESHTRAIN" train job.toml "${ARGS[@]}" --resume
rm "$lock"
"$MESHTRAIN" train job.toml "${ARGS[@]}" --training.steps=$((STEPS + 40)) --resume > takeover.log 2>&1 ||
  { kill -9 "$hung"; cat takeover.log; fail "the takeover after deleting the lock file"; }
grep -q "^done: 20 steps" takeover.log || { kill -9 "$hung"; cat takeover.log; fail "the takeover did not train"; }
kill -9 "$hung"
wait "$hung" 2> /dev/null || true
echo "run dir lock ok"
