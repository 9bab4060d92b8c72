#!/usr/bin/env bash
# Small-message all-reduce latency: meshtrain (shm, auto) against OpenMPI's
# MPI_Allreduce, in alternating runs.
#
# On this VM a 2-rank latency is bimodal for both (~1.2 us, or ~3-18 us
# while the host is loaded, for a few seconds at a time), and drifts within
# minutes, so a single pair of runs proves nothing: this
# alternates PAIRS pairs and prints each pair, then both medians and minima.
# Results: bench/RESULTS.md, rows 16-17 (every run: bench/log/03-collectives.md).
#
# Environment knobs (defaults in brackets):
#   BUILD [build]  NPROC [2]  SIZE [4K]  PAIRS [12]  ITERS [5000]
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build}"
NPROC="${NPROC:-2}"
SIZE="${SIZE:-4K}"
PAIRS="${PAIRS:-12}"
ITERS="${ITERS:-5000}"
source bench/pairs_lib.sh

time_us() { grep -o '"time_us":[0-9.]*' | head -1 | cut -d: -f2; }

echo "$NPROC ranks, $SIZE all-reduce, $ITERS calls a run, $PAIRS alternating pairs (median time_us of a run)"
echo "pair meshtrain openmpi"
results=()
for i in $(seq 1 "$PAIRS"); do
  mt=$(meshtrain_allreduce "$NPROC" auto "$SIZE:$SIZE" "$ITERS" | time_us)
  mpi=$(openmpi_allreduce "$NPROC" "$SIZE:$SIZE" "$ITERS" | time_us)
  echo "$i ${mt:-FAILED} ${mpi:-FAILED}"
  results+=("${mt:-nan} ${mpi:-nan}")
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin if line.strip()]
mt, mpi = [r[0] for r in rows], [r[1] for r in rows]
faster = sum(a < b for a, b in rows)
print(f"meshtrain median {statistics.median(mt):.2f} us (min {min(mt):.2f}), "
      f"OpenMPI median {statistics.median(mpi):.2f} us (min {min(mpi):.2f}); "
      f"meshtrain faster in {faster} of {len(rows)} pairs")'
