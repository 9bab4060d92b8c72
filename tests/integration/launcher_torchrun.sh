# The worker binary under a torchrun-style environment set by hand:
# MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK for 2 processes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/launcher_lib.sh"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for r in 0 1; do
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
    "$MESHTRAIN" train job.toml "${DP_ARGS[@]}" --training.out_dir="$WORK/torchrun" > "rank$r.txt" 2>&1 &
  pids+=($!)
done
for r in 0 1; do wait "${pids[$r]}" || { cat "rank$r.txt"; fail "rank $r failed"; }; done
check_run rank0.txt "$WORK/torchrun"
echo "launcher torchrun ok"
