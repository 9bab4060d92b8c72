# A rank killed with SIGKILL in the middle of collectives: every other rank
# fails within the timeout with an error naming the dead rank; nothing hangs.
# Ranks are started by hand (not by `meshtrain launch`, which would stop the
# survivors itself) so the survivors must notice on their own.
source "$(dirname "$0")/lib.sh"

run_case() {  # transport algo world victim [reducers]
  local transport="$1" algo="$2" world="$3" victim="$4" reducers="${5:-0}"
  local total=$((world + reducers)) port token pids=()
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  token="tok-$RANDOM$RANDOM"
  for ((r = 0; r < total; r++)); do
    local cmd=("$MESHTRAIN" bench collectives --transport "$transport" --algo "$algo" --sizes 1M:1M --iters 100000 --timeout 20)
    if ((r >= world)); then cmd=("$MESHTRAIN" reducer --transport "$transport" --timeout 20); fi
    RANK=$r WORLD_SIZE=$total LOCAL_RANK=$r LOCAL_WORLD_SIZE=$total MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      MESHTRAIN_JOB_ID="dead-$transport-$port" MESHTRAIN_JOB_TOKEN="$token" MESHTRAIN_NUM_REDUCERS=$reducers \
      "${cmd[@]}" > "out.$r" 2> "err.$r" &
    pids+=($!)
  done
  sleep 3
  kill -9 "${pids[$victim]}"
  local start=$SECONDS named=0
  for ((r = 0; r < total; r++)); do
    ((r == victim)) && continue
    if wait "${pids[$r]}"; then cat "err.$r" >&2; fail "$transport/$algo: rank $r exited 0 after rank $victim died"; fi
    if grep -q "rank $victim" "err.$r"; then
      named=$((named + 1))
    elif [ "$transport" = shm ]; then
      # Shared memory spreads the first failure job-wide, so every rank names the dead one.
      cat "err.$r" >&2; fail "$transport/$algo: rank $r's error does not name rank $victim"
    fi
  done
  # Over TCP a rank that gives up tells its other peers why (an abort
  # frame), but only where its stream to them is between messages; one whose
  # stream was cut mid-message names the neighbour that closed it instead.
  ((named > 0)) || fail "$transport/$algo: no survivor named rank $victim"
  wait "${pids[$victim]}" 2>/dev/null || true
  ((SECONDS - start < 20)) || fail "$transport/$algo: survivors took $((SECONDS - start)) s to notice"
  for ((r = 0; r < total; r++)); do
    ((r == victim)) || echo "$transport/$algo, rank $r of $total: $(head -c 240 "err.$r")"
  done
  echo "$transport/$algo: survivors of rank $victim failed in $((SECONDS - start)) s"
}

run_case shm ring 3 1
run_case tcp ring 3 2
run_case tcp ring 4 2   # ranks 0 and 3 never exchange with rank 2 in the ring: they learn of it by relay
run_case shm reduction_server 2 2 1   # the reducer (rank 2) dies
run_case tcp reduction_server 2 0 1   # a worker dies; the reducer and the other worker notice
