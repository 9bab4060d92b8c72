# Killing one process of a `meshtrain run` job at a given step; sourced by
# chaos_kill.sh and bench/chaos.sh. Needs MESHTRAIN, WORK and fail().

# reached OUT_DIR STEP: the job's metrics show STEP or later.
reached() {
  python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, os, sys
best = 0
if os.path.exists(sys.argv[1]):
    for line in open(sys.argv[1]):
        try:
            best = max(best, json.loads(line).get("step", 0))
        except ValueError:  # a line still being written
            pass
sys.exit(0 if best >= int(sys.argv[2]) else 1)
PY
}

# kill_at RUN_PID OUT_DIR STEP RANK: once the job of supervisor RUN_PID has
# logged STEP, kill -9 its replica with RANK=RANK (the supervisor's children
# are the replicas; their RANK tells them apart). Fails when either never
# happens.
kill_at() {
  local run_pid=$1 out=$2 at=$3 rank=$4 victim="" pid
  for _ in $(seq 1200); do reached "$out" "$at" && break; sleep 0.05; done
  reached "$out" "$at" || fail "the job in $out never reached step $at"
  for pid in $(pgrep -P "$run_pid"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "RANK=$rank"; then victim=$pid; fi
  done
  [ -n "$victim" ] || fail "the job in $out has no process with RANK=$rank"
  kill -9 "$victim"
}

# final_params OUT_DIR STEP FILE: the parameters of the job's checkpoint at STEP in one file.
final_params() {
  "$MESHTRAIN" consolidate "$1/checkpoints/$(printf 'step_%08d' "$2")" "$3" > /dev/null || fail "consolidate $1 step $2"
}
