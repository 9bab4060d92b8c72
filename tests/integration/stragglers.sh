# Per-rank telemetry and stragglers: a data-parallel job under `meshtrain run`
# whose worker 1 is throttled (stopped 40 ms of every 60 ms, as a CPU quota
# would) is flagged as a straggler within three log intervals, without
# stopping; the per-rank records are in metrics.jsonl and `meshtrain plot
# --per-rank` draws them. A clean 4000-step run (about six judged windows of 0.5 s) raises no flag.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
chaos_job
ARGS=(--nproc 2 --parallel.data=allreduce --training.log_every=10 --training.eval_every=0 --checkpoint.every=0)

"$MESHTRAIN" run job.toml "${ARGS[@]}" --training.steps=4000 --training.out_dir="$WORK/clean" > clean.txt 2>&1 ||
  { cat clean.txt; fail "clean run"; }
! grep -q "straggler" clean.txt || { grep straggler clean.txt; fail "a clean run flagged a straggler"; }
n=$(grep -c "\"ranks\"" "$WORK/clean/metrics.jsonl"); [ "$n" -eq 400 ] || { tail -3 clean.txt; fail "expected per-rank fields every 10 steps, found $n"; }

"$MESHTRAIN" run job.toml "${ARGS[@]}" --training.steps=160 "${CHAOS_MODEL[@]:1}" --training.log_every=10 \
  --training.out_dir="$WORK/slow" > slow.txt 2>&1 &
run_pid=$!
while kill -0 "$run_pid" 2> /dev/null && ! reached "$WORK/slow/metrics.jsonl" 40; do sleep 0.05; done
victim=$(worker_pid "$run_pid" 1)
[ -n "$victim" ] || { cat slow.txt; fail "no worker 1 to throttle"; }
from=$(latest_step "$WORK/slow/metrics.jsonl")
while kill -0 "$victim" 2> /dev/null && ! grep -q "worker 1 is a straggler" slow.txt; do
  kill -STOP "$victim" 2> /dev/null || true; sleep 0.04; kill -CONT "$victim" 2> /dev/null || true; sleep 0.02
done
wait "$run_pid" || { cat slow.txt; fail "the throttled job failed"; }
flagged=$(grep -o "step [0-9]*: worker 1 is a straggler" slow.txt | head -n 1 | grep -o "[0-9]*" | head -n 1)
[ -n "$flagged" ] || { cat slow.txt; fail "worker 1 was never flagged"; }
# Throttled from step $from on: flagged at the third log line after it at the latest.
[ "$flagged" -le $(( (from / 10 + 3) * 10 )) ] || { grep "\"ranks\"" "$WORK/slow/metrics.jsonl" | head -9 | cut -c1-400; fail "flagged at step $flagged, throttled from step $from"; }
! grep -q "worker 0 is a straggler" slow.txt || fail "worker 0 was flagged"
grep -q "done: 160 steps" slow.txt || fail "the job did not run to its end"
"$MESHTRAIN" plot "$WORK/slow/metrics.jsonl" --per-rank --out ranks.svg > /dev/null || fail "plot --per-rank"
python3 - ranks.svg <<'PY' || fail "the heat map"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cells = [e for e in root.iter() if e.tag.endswith("rect") and e.get("data-worker") is not None]
assert {c.get("data-worker") for c in cells} == {"0", "1"}, "two rows of cells"
print(len(cells), "cells")
PY
echo "stragglers: worker 1 throttled from step $from, flagged at step $flagged; a clean 4000-step run raised no flag"
