# A parameter-server job survives a worker killed with SIGKILL: the other
# workers go on, the servers keep serving, and a replacement started with the
# same rank rejoins (at the slowest live worker's clock, the dead one's
# being behind) and pushes again. The job
# still ends after training.steps pushes with a checkpoint `meshtrain eval`
# reads, and every process exits 0.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/ps/ps_lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
ARGS=(--training.steps=6000 --training.log_every=50 --training.eval_every=0 --checkpoint.every=0
      --parallel.servers=2 --parallel.timeout_s=30 --parallel.max_staleness=8 --training.out_dir="$WORK/run")
mkdir -p "$WORK/run"

# wait_for_step N: polls until server 0 has reported step >= N (30 s at most).
wait_for_step() {
  for _ in $(seq 600); do
    reached "$WORK/run/server-0.jsonl" "$1" && return 0
    sleep 0.05
  done
  cat "$WORK/run"/*.log >&2
  fail "server 0 did not reach step $1"
}

ps_env 4 2
ps_start_servers "$WORK/run" job.toml "${ARGS[@]}"
pids=()
for r in 0 1 2 3; do ps_start_worker "$WORK/run" $r job.toml "${ARGS[@]}"; pids+=($PS_PID); done

wait_for_step 500
kill -9 "${pids[2]}"
wait "${pids[2]}" 2>/dev/null && fail "the killed worker exited 0?"
killed_at=$(latest_step "$WORK/run/server-0.jsonl")
wait_for_step $((killed_at + 500))  # the others go on without it
grep -q "worker rank 2 left" "$WORK/run/server-0.log" || fail "server 0 did not notice the dead worker"

ps_start_worker "$WORK/run" 2 job.toml "${ARGS[@]}"
replacement=$PS_PID
for p in "${pids[0]}" "${pids[1]}" "${pids[3]}" $replacement; do
  wait "$p" || { cat "$WORK/run"/*.log >&2; fail "a worker (pid $p) exited non-zero"; }
done
for p in "${PS_SERVER_PIDS[@]}"; do wait "$p" || { cat "$WORK/run"/server-*.log >&2; fail "a server exited non-zero"; }; done

grep -q "ps-worker rank 2 of 4: rejoined 2 servers at clock [1-9]" "$WORK/run/worker-2.log" ||
  { cat "$WORK/run/worker-2.log"; fail "the replacement did not rejoin with a clock"; }
grep -q "worker rank 2 rejoined at clock" "$WORK/run/server-0.log" || fail "server 0's log does not show the rejoin"
grep -q "done at step 6000" "$WORK/run/server-0.log" || { cat "$WORK/run/server-0.log"; fail "the job did not finish"; }
# The replacement contributed pushes of its own.
grep -q "ps-worker rank 2: done: [1-9][0-9]* pushes" "$WORK/run/worker-2.log" ||
  { cat "$WORK/run/worker-2.log"; fail "the replacement pushed nothing"; }
python3 - "$WORK/run/server-0.jsonl" <<'PY'
import json, sys
summary = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
rank2 = summary["workers"][2]
assert rank2["joins"] == 2, rank2
assert sum(w["pushes"] for w in summary["workers"]) == summary["pushes"] == 6000, summary
print(f"rank 2: {rank2}; staleness mean {summary['staleness_mean']:.2f} max {summary['staleness_max']}")
PY
"$MESHTRAIN" eval "$WORK/run/checkpoints" > eval.txt || fail "eval of the final checkpoint"
grep -q "step 6000" eval.txt || { cat eval.txt; fail "eval read another checkpoint"; }
echo "ps worker rejoin"
