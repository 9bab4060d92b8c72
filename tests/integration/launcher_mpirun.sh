# The worker binary under Open MPI's mpirun (OMPI_COMM_WORLD_* variables).
# Skipped (ctest's skip code 77) where mpirun is not installed.
source "$(dirname "$0")/lib.sh"
command -v mpirun > /dev/null || { echo "mpirun not found: skipped"; exit 77; }
source "$(dirname "$0")/launcher_lib.sh"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMPI_MCA_btl_vader_single_copy_mechanism=none \
  mpirun -np 2 --oversubscribe "${root[@]}" -x MASTER_ADDR -x MASTER_PORT \
  "$MESHTRAIN" train job.toml "${DP_ARGS[@]}" --training.out_dir="$WORK/mpirun" > mpirun.txt 2>&1 ||
  { cat mpirun.txt; fail "mpirun job failed"; }
check_run mpirun.txt "$WORK/mpirun"
echo "launcher mpirun ok"
