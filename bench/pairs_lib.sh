# shellcheck shell=bash
# Sourced by the alternating-pairs benchmarks (latency_pairs.sh,
# bandwidth_pairs.sh): one all-reduce run of meshtrain over shared memory or
# of OpenMPI, JSON lines on stdout. Needs BUILD set by the caller.
MESHTRAIN="$BUILD/src/meshtrain/meshtrain"
OPENMPI="$BUILD/bench/bench_openmpi_allreduce"
for exe in "$MESHTRAIN" "$OPENMPI"; do
  [ -x "$exe" ] || { echo "missing $exe: cmake -S . -B $BUILD -G Ninja && ninja -C $BUILD meshtrain bench_openmpi_allreduce"; exit 1; }
done

meshtrain_allreduce() {  # nproc algo sizes iters
  "$MESHTRAIN" bench collectives --nproc "$1" --transport shm --algo "$2" --sizes "$3" --iters "$4" --json 2>/dev/null
}

# At its best malloc setting (see /work/shared/PEERS.md: page faults).
openmpi_allreduce() {  # nproc sizes iters
  MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184 mpirun --allow-run-as-root --oversubscribe \
    -np "$1" "$OPENMPI" --sizes "$2" --iters "$3" 2>/dev/null
}
