# The worker binary under the environment srun gives each task:
# SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID (+ MASTER_ADDR/PORT,
# which a Slurm batch script exports for the rendezvous).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/launcher_lib.sh"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for r in 0 1; do
  SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_NTASKS_PER_NODE=2 SLURM_JOB_ID=$$ \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$MESHTRAIN" train job.toml "${DP_ARGS[@]}" --training.out_dir="$WORK/slurm" > "rank$r.txt" 2>&1 &
  pids+=($!)
done
for r in 0 1; do wait "${pids[$r]}" || { cat "rank$r.txt"; fail "rank $r failed"; }; done
check_run rank0.txt "$WORK/slurm"
echo "launcher slurm ok"
