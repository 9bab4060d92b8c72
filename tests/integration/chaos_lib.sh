# Watching a job's metrics and killing one of its processes at a given step;
# sourced by chaos_kill.sh, run_restart.sh, ps_server_restart.sh,
# heartbeat_hang.sh, ps_worker_rejoin.sh, gpu_restart.sh, nccl_parity.sh
# and bench/chaos.sh. Needs MESHTRAIN,
# WORK and fail(); chaos_job also lib.sh's make_text and tiny_config.

# chaos_job: the job the chaos tests run and kill, in job.toml (the tiny
# config over 100 kB of text); CHAOS_MODEL widens its model so a step takes
# ~0.1 s on one core (a kill lands mid-run), logs every step and restarts fast.
chaos_job() {
  make_text data.txt 100000
  tiny_config job.toml data.txt
}
CHAOS_MODEL=(--training.log_every=1 --model.n_embd=128 --model.block_size=128 --training.batch_size=8
             --parallel.restart_backoff_s=0.2)

# latest_step METRICS: the highest step in a metrics file (0 before any).
# Shell tools, not a Python start per poll: the watch loops call this every
# 50 ms, and a ~50 ms step must not outrun them (a record being written reads
# as a lower step at worst; MetricsLog writes compact JSON, "step":N).
latest_step() {
  local best=0
  [ -f "$1" ] && best=$(grep -o '"step":[0-9]*' "$1" | cut -d: -f2 | sort -n | tail -n 1)
  echo "${best:-0}"
}

# reached METRICS STEP: the metrics file shows STEP or later.
reached() { [ "$(latest_step "$1")" -ge "$2" ]; }

# kill_at RUN_PID METRICS STEP RANK: once the job of supervisor RUN_PID has
# logged STEP in METRICS (a metrics file it writes), kill -9 its replica with
# RANK=RANK (the supervisor's children are the replicas; their RANK tells them
# apart), and print the step logged then. Fails when either never happens.
# worker_pid RUN_PID RANK: the pid of the replica of supervisor RUN_PID whose
# environment says RANK=RANK (empty when there is none).
worker_pid() {
  local pid
  for pid in $(pgrep -P "$1"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "RANK=$2"; then echo "$pid"; return; fi
  done
}

kill_at() {
  local run_pid=$1 out=$2 at=$3 rank=$4 victim
  while kill -0 "$run_pid" 2> /dev/null && ! reached "$out" "$at"; do sleep 0.05; done
  reached "$out" "$at" || { fail "the job ended before $out reached step $at"; return 1; }
  victim=$(worker_pid "$run_pid" "$rank")
  [ -n "$victim" ] || { fail "the job in $out has no process with RANK=$rank (finished already?)"; return 1; }
  kill -9 "$victim"
  latest_step "$out"
}

# final_params OUT_DIR STEP FILE: the parameters of the job's checkpoint at STEP in one file.
final_params() {
  "$MESHTRAIN" consolidate "$1/checkpoints/$(printf 'step_%08d' "$2")" "$3" > /dev/null || fail "consolidate $1 step $2"
}

# killed_same_bits NAME STEPS AT RANK ARGS...: `meshtrain run job.toml ARGS` (a job of STEPS
# steps) once straight, once with its process of RANK=RANK killed -9 after step AT; the whole job
# restarts, resumes from its newest checkpoint, and must end on the straight run's bits. Prints
# the step the kill landed after.
killed_same_bits() {
  local name=$1 steps=$2 at=$3 rank=$4 run_pid killed_at
  shift 4
  "$MESHTRAIN" run job.toml "$@" --training.out_dir="$WORK/$name-straight" > "$name-straight.log" 2>&1 ||
    { cat "$name-straight.log" >&2; fail "$name: the uninterrupted job"; return 1; }
  "$MESHTRAIN" run job.toml "$@" --training.out_dir="$WORK/$name" > "$name.log" 2>&1 &
  run_pid=$!
  killed_at=$(kill_at "$run_pid" "$WORK/$name/metrics.jsonl" "$at" "$rank") || { cat "$name.log" >&2; return 1; }
  wait "$run_pid" || { cat "$name.log" >&2; fail "$name: the job failed after rank $rank died"; return 1; }
  grep -q "restarting the whole job" "$name.log" || { cat "$name.log" >&2; fail "$name: no restart after the kill"; return 1; }
  final_params "$WORK/$name-straight" "$steps" "$name-straight.safetensors"
  final_params "$WORK/$name" "$steps" "$name.safetensors"
  cmp "$name-straight.safetensors" "$name.safetensors" ||
    { fail "$name: rank $rank killed after step $killed_at: parameters differ from the uninterrupted run"; return 1; }
  echo "$killed_at"
}
