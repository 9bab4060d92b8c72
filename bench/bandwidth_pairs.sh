#!/usr/bin/env bash
# Large all-reduce bus bandwidth: meshtrain's shm ring against OpenMPI's
# MPI_Allreduce, in alternating runs.
#
# On this VM a run is now and then caught in a slow mode that lasts seconds
# (the host's load) and hits whichever program runs then, so one pair of
# runs proves little: this alternates PAIRS pairs, prints each pair's busbw
# per size, then per size both medians, the ratio of the medians, the worst
# pair's ratio and in how many pairs meshtrain reached 1.2x.
# Results: bench/RESULTS.md, rows 12-13 (every run: bench/log/03-collectives.md).
#
# Environment knobs (defaults in brackets):
#   BUILD [build]  NPROC [2]  SIZES [64M:256M]  PAIRS [8]  ITERS [20]
#   MESHTRAIN_SHM_SINGLE_COPY [1]  (0: the slots only, for comparison)
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build}"
NPROC="${NPROC:-2}"
SIZES="${SIZES:-64M:256M}"
PAIRS="${PAIRS:-8}"
ITERS="${ITERS:-20}"
source bench/pairs_lib.sh

busbw() { grep -o '"busbw_GBps":[0-9.]*' | cut -d: -f2 | paste -sd' '; }

echo "$NPROC ranks, sizes $SIZES, $ITERS calls a size, $PAIRS alternating pairs (busbw GB/s per size)"
rows=()
for i in $(seq 1 "$PAIRS"); do
  mt=$(meshtrain_allreduce "$NPROC" ring "$SIZES" "$ITERS" | busbw)
  mpi=$(openmpi_allreduce "$NPROC" "$SIZES" "$ITERS" | busbw)
  echo "pair $i  meshtrain: ${mt:-FAILED}  openmpi: ${mpi:-FAILED}"
  rows+=("${mt:-nan}|${mpi:-nan}")
done
printf '%s\n' "${rows[@]}" | SIZES="$SIZES" python3 -c '
import os, statistics, sys
pairs = [[list(map(float, side.split())) for side in line.strip().split("|")] for line in sys.stdin if line.strip()]
units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
to_bytes = lambda s: int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)
lo, hi = (to_bytes(s.strip()) for s in os.environ["SIZES"].split(":"))
sizes = []
while lo <= hi:  # the sizes meshtrain bench collectives runs: powers of two from lo to hi
    sizes.append(f"{lo >> 20}M" if lo >= 1 << 20 else f"{lo >> 10}K")
    lo *= 2
print("size  meshtrain median  openmpi median  ratio of medians  worst pair  pairs >= 1.2x")
for k, name in enumerate(sizes):
    got = [(mt[k], mpi[k]) for mt, mpi in pairs if len(mt) > k and len(mpi) > k]
    if not got:
        continue
    ratios = [a / b for a, b in got]
    mt_med, mpi_med = statistics.median(a for a, _ in got), statistics.median(b for _, b in got)
    print(f"{name:>5} {mt_med:17.2f} {mpi_med:15.2f} {mt_med / mpi_med:17.2f}x {min(ratios):10.2f}x "
          f"{sum(r >= 1.2 for r in ratios):7d} of {len(got)}")'
