# Helpers for parameter-server integration tests; sourced after lib.sh.
# The tests start each process themselves, with the launch environment a
# launcher sets, so they can kill and restart single processes.

# ps_env WORKERS SERVERS: exports the launch environment of a job with
# WORKERS workers (ranks 0..WORKERS-1) and SERVERS servers on loopback ports
# that were free a moment ago.
ps_env() {
  PS_WORKERS=$1
  PS_SERVERS=$2
  export WORLD_SIZE=$((PS_WORKERS + PS_SERVERS)) MESHTRAIN_NUM_SERVERS=$PS_SERVERS
  export MESHTRAIN_SERVER_ADDRS=$(python3 -c "
import socket
ss = [socket.socket() for _ in range($PS_SERVERS)]
for s in ss: s.bind(('127.0.0.1', 0))
print(','.join('127.0.0.1:%d' % s.getsockname()[1] for s in ss))")
  export MESHTRAIN_JOB_ID="ps-test-$$" MESHTRAIN_JOB_TOKEN="token-$$-$RANDOM"
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
}

# ps_start_servers DIR CONFIG ARGS...: starts every server in the background,
# logging to DIR/server-<j>.log; their pids go to PS_SERVER_PIDS.
ps_start_servers() {
  local dir=$1 config=$2; shift 2
  PS_SERVER_PIDS=()
  for ((j = 0; j < PS_SERVERS; j++)); do
    RANK=$((PS_WORKERS + j)) "$MESHTRAIN" ps-server "$config" "$@" > "$dir/server-$j.log" 2>&1 &
    PS_SERVER_PIDS+=($!)
  done
}

# ps_start_worker DIR RANK CONFIG ARGS...: starts one worker (`meshtrain
# train` with parallel.data = "parameter_server") in the background,
# appending to DIR/worker-<rank>.log; its pid is in PS_PID.
ps_start_worker() {
  local dir=$1 rank=$2 config=$3; shift 3
  RANK=$rank "$MESHTRAIN" train "$config" --parallel.data=parameter_server "$@" >> "$dir/worker-$rank.log" 2>&1 &
  PS_PID=$!
}

# ps_val_loss LOG: the final val_loss server 0 printed.
ps_val_loss() { sed -n 's/.*final val_loss \([0-9.]*\).*/\1/p' "$1"; }
