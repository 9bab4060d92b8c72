# Asynchronous parameter servers (parallel.data = "parameter_server") against
# the single-process run on a tiny GPT:
#   1. one worker and two servers reproduce the single-process run bit for
#      bit (no staleness: every push is computed on the latest parameters);
#   2. four workers and two servers converge. Step budget, measured on the
#      2-core machine (lr 1e-3, batch 4, 400 single-process steps reach
#      val_loss 2.548): with the same number of samples (400 pushes of one
#      worker batch each) the async run is 3-10% behind, its gradients being
#      ~2 pushes stale on average; with twice the samples (800 pushes) it is
#      4-7% ahead (2.39-2.45 over 12 runs). Without data/kjv.txt (generated
#      text, an easier task) the single run reaches 1.66, the async one is
#      10-15% behind at 1x and 22-27% ahead at 2x. So the budget is 2x: at
#      2x we require no worse than the single-process loss + 1%; at 1x only
#      a sanity bound, within 25%.
# The final checkpoint is server 0's, and `meshtrain eval` reads it.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/ps/ps_lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
COMMON=(--training.steps=400 --training.log_every=100 --training.eval_every=0 --training.eval_batches=8
        --checkpoint.every=0 --parallel.timeout_s=60)

val_loss() {  # val_loss CHECKPOINT_ROOT
  "$MESHTRAIN" eval "$1" --json | python3 -c "import json, sys; print(json.load(sys.stdin)['val_loss'])"
}

# run_ps NAME WORKERS ARGS...: a whole job with 2 servers; logs in $WORK/NAME.
run_ps() {
  local name=$1 workers=$2; shift 2
  mkdir -p "$WORK/$name"
  ps_env "$workers" 2
  ps_start_servers "$WORK/$name" job.toml "${COMMON[@]}" --parallel.servers=2 --training.out_dir="$WORK/$name" "$@"
  local pids=()
  for ((r = 0; r < workers; r++)); do
    ps_start_worker "$WORK/$name" $r job.toml "${COMMON[@]}" --parallel.servers=2 --training.out_dir="$WORK/$name" "$@"
    pids+=($PS_PID)
  done
  for ((r = 0; r < workers; r++)); do
    wait "${pids[$r]}" || { cat "$WORK/$name/worker-$r.log" "$WORK/$name"/server-*.log >&2; fail "$name: worker $r exited non-zero"; }
  done
  for p in "${PS_SERVER_PIDS[@]}"; do
    wait "$p" || { cat "$WORK/$name"/server-*.log >&2; fail "$name: a server exited non-zero"; }
  done
  grep -q "checkpoint " "$WORK/$name/server-0.log" || { cat "$WORK/$name/server-0.log"; fail "$name: no checkpoint"; }
}

"$MESHTRAIN" train job.toml "${COMMON[@]}" --training.out_dir="$WORK/single" > single.log 2>&1 || { cat single.log; fail "single-process run"; }
single=$(val_loss "$WORK/single/checkpoints")

run_ps ps1 1
cmp "$WORK/single/checkpoints/step_00000400/model.safetensors" "$WORK/ps1/checkpoints/step_00000400/model.safetensors" ||
  fail "one worker did not reproduce the single-process parameters"

run_ps ps4 4
at_1x=$(val_loss "$WORK/ps4/checkpoints")
[ "$(ps_val_loss "$WORK/ps4/server-0.log")" = "$(printf %.4f "$at_1x")" ] || fail "server 0's val_loss differs from eval's"
run_ps ps4x2 4 --training.steps=800
at_2x=$(val_loss "$WORK/ps4x2/checkpoints")
echo "val_loss: single-process 400 steps $single; 4 async workers: 400 pushes $at_1x, 800 pushes $at_2x"
grep -h "done at step" "$WORK"/ps4*/server-0.log

python3 - "$single" "$at_1x" "$at_2x" <<'PY' || fail "async run did not converge within its budget"
import sys
single, x1, x2 = map(float, sys.argv[1:])
assert x1 <= single * 1.25, f"400 pushes: {x1} > 1.25 * {single}"
assert x2 <= single * 1.01, f"800 pushes: {x2} > 1.01 * {single}"
PY

# The staleness summary went to the servers' metrics files.
python3 - "$WORK/ps4/server-0.jsonl" "$WORK/ps4/server-1.jsonl" <<'PY'
import json, sys
for path in sys.argv[1:]:
    recs = [json.loads(l) for l in open(path)]
    s = [r for r in recs if r.get("event") == "summary"]
    assert len(s) == 1, path
    s = s[0]
    assert s["pushes"] >= 400 - 4 and sum(w["pushes"] for w in s["workers"]) == s["pushes"], s
    assert all(w["pushes"] > 0 for w in s["workers"]), s
    assert sum(s["staleness_histogram"]) == s["pushes"] and s["staleness_max"] >= 1, s
print("staleness summaries ok")
PY
echo "ps converges"
