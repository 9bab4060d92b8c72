#!/usr/bin/env bash
# All-reduce bus bandwidth: meshtrain against OpenMPI and Gloo, in one run.
#
# At 2 and 4 ranks ($NPROCS), sizes $SIZES (fp32 sum), runs
#   * meshtrain bench collectives: shm ring, shm auto, tcp ring, tcp auto, and the
#     Reduction Server over shm with R = N reducers
#   * OpenMPI 4.1 MPI_Allreduce (bench_openmpi_allreduce) under mpirun, at its
#     best malloc setting MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184
#     (see /work/shared/PEERS.md: without it, 64 MiB+ falls ~20x to page faults)
#   * Gloo (Debian's libgloo-dev) over its TCP transport: ring, ring_chunked,
#     halving_doubling, bcube (bench_gloo_allreduce); "gloo best" is the best
#     of the four at each size
#   * memcpy on one thread (bench_memcpy), as a reference ceiling
# then prints busbw per size (GB/s, nccl-tests definition) and meshtrain's
# ratios: shm ring / OpenMPI, shm ring / gloo best, tcp best / gloo best
# (tcp best: the better of tcp ring and tcp auto, as gloo best is Gloo's best
# algorithm at each size).
# Results: bench/RESULTS.md, rows 14-15 (bench/log/03-collectives.md). Takes ~3-5 minutes.
#
# Environment knobs (defaults in brackets):
#   BUILD [build]  NPROCS ["2 4"]  SIZES [4K:256M]  ITERS [40]
#   IDLE_WAIT [60] IDLE_PCT [15]  before each run, wait up to IDLE_WAIT s for
#                the CPUs to be under IDLE_PCT % busy (other work skews figures)
#   OUT [bench/out/collectives]  (raw JSONL, git-ignored)
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build}"
NPROCS="${NPROCS:-2 4}"
SIZES="${SIZES:-4K:256M}"
ITERS="${ITERS:-40}"
IDLE_WAIT="${IDLE_WAIT:-60}"
IDLE_PCT="${IDLE_PCT:-15}"
OUT="${OUT:-bench/out/collectives}"
MESHTRAIN="$BUILD/src/meshtrain/meshtrain"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

for exe in "$MESHTRAIN" "$BUILD/bench/bench_memcpy"; do
  [ -x "$exe" ] || { echo "missing $exe: cmake -S . -B $BUILD -G Ninja && ninja -C $BUILD meshtrain bench_memcpy bench_openmpi_allreduce bench_gloo_allreduce"; exit 1; }
done

source bench/idle.sh  # the script runs from the repository root

# run LABEL COMMAND...: waits for idle CPUs, runs, keeps the JSON lines.
run() {
  local label="$1"; shift
  wait_idle
  echo "  $label   (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  local start=$SECONDS
  timeout 300 "$@" 2> "$OUT/last.err" | grep '^{' >> "$RESULTS"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "    FAILED (status $rc):"; tail -5 "$OUT/last.err" | sed 's/^/      /'; }
  echo "    $((SECONDS - start)) s"
}

echo "collectives: sizes $SIZES, ranks $NPROCS, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
run "memcpy" "$BUILD/bench/bench_memcpy" --sizes 1M:256M --iters "$ITERS"
for n in $NPROCS; do
  mt=("$MESHTRAIN" bench collectives --nproc "$n" --sizes "$SIZES" --iters "$ITERS" --json)
  run "meshtrain shm ring n=$n" "${mt[@]}" --transport shm --algo ring
  run "meshtrain shm auto n=$n" "${mt[@]}" --transport shm --algo auto
  run "meshtrain tcp ring n=$n" "${mt[@]}" --transport tcp --algo ring
  run "meshtrain tcp auto n=$n" "${mt[@]}" --transport tcp --algo auto
  run "meshtrain shm reduction_server n=$n R=$n" "${mt[@]}" --transport shm --algo reduction_server --reducers "$n"
  if [ -x "$BUILD/bench/bench_openmpi_allreduce" ]; then
    run "OpenMPI n=$n (best malloc setting)" env MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184 \
      "${MPIRUN[@]}" -np "$n" "$BUILD/bench/bench_openmpi_allreduce" --sizes "$SIZES" --iters "$ITERS"
  else
    echo "  OpenMPI: not built (no MPI found by CMake)"
  fi
  if [ -x "$BUILD/bench/bench_gloo_allreduce" ]; then
    run "Gloo n=$n (4 algorithms)" "$BUILD/bench/bench_gloo_allreduce" --nproc "$n" --sizes "$SIZES" --iters "$ITERS"
  else
    echo "  Gloo: not built (libgloo-dev not installed)"
  fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/collectives_table.py "$RESULTS"
