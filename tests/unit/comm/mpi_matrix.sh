#!/usr/bin/env bash
# The collectives matrix (all-reduce algorithms and every other collective,
# every count and dtype) over the MPI transport: N processes under Open MPI's
# mpirun, each one rank. Arguments: the unit_comm binary, N.
# Exit 77 (skipped) where mpirun is missing.
set -euo pipefail
binary=$1 n=$2
command -v mpirun > /dev/null || { echo "mpirun not found: skipped"; exit 77; }
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
# vader's single-copy path needs ptrace rights a container may not grant.
OMPI_MCA_btl_vader_single_copy_mechanism=none \
  exec mpirun -np "$n" --oversubscribe "${root[@]}" "$binary" \
  --gtest_filter="Collectives/*.*/mpi_n$n" --gtest_brief=1
