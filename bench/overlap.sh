#!/usr/bin/env bash
# Overlap of gradient communication with backward, on an emulated network.
#
# Two emulated hosts (network namespaces, bench/netns/netns.sh), each behind a
# full-duplex link rate-limited to $RATE, run one meshtrain worker each
# (1 compute thread) over TCP:
#   ip netns exec mt-hK env RANK=K WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
#     MASTER_ADDR=10.77.0.1 MASTER_PORT=... MESHTRAIN_JOB_ID=... MESHTRAIN_JOB_TOKEN=... \
#     MESHTRAIN_TRANSPORT=tcp meshtrain train examples/gpt-bench-$CONFIG.toml \
#     --parallel.data=allreduce --parallel.transport=tcp --parallel.bucket_mb=B --training.threads=1
# for each bucket size B in $BUCKETS (MiB). The largest default (1024 MiB) puts
# every gradient in one bucket (after meshtrain's fixed 1 MiB first bucket,
# which holds the last layers' gradients, like DDP's first bucket): it is
# all-reduced only after backward, so almost nothing can overlap; it is the
# reference for the bucketed runs. Each run's bucket plan is printed.
#
# From rank 0's per-step metrics (after $SKIP warm-up steps) it prints
#   hidden share = 1 - comm_exposed_ms / comm_ms (median over steps; "pooled":
#                  1 - sum exposed / sum busy), target >= 80%
#   hidden vs one bucket = 1 - exposed / exposed of the one-bucket run: the
#                  one-bucket run starts all communication after backward, so
#                  its exposed time is the step's whole communication time;
#                  this share does not count a bucket's wait for the slower
#                  rank as communication (comm_ms does), so it is the stricter
#   tokens/s (global, median) and the ratio bucketed / one bucket
#   comm share = comm_ms / step_ms (how much of a step the link is busy)
# With BASELINE=1 it first runs one worker alone in host 0 (no communication),
# the ceiling for 2 workers is twice that.
#
# Needs root (network namespaces). Runtime: ~35 s per run for config B at
# 1 thread (16 steps of ~1.7 s, plus start, final eval and checkpoint), so
# ~3 min with the defaults (measured 163 s), plus waits for idle CPUs.
#
# Knobs (defaults in brackets):
#   CONFIG [b] (examples/gpt-bench-$CONFIG.toml; a or b)   RATE [1gbit] per host link, each direction
#   BUCKETS ["1 4 25 1024"] MiB    STEPS [16] training steps per run   SKIP [5] warm-up steps not counted
#   THREADS [1] compute threads per worker   ALGO [ring] --parallel.all_reduce
#   BASELINE [1]   PIN [0] (1: pin host K's worker to CPU K with taskset)
#   MESHTRAIN [build/src/meshtrain/meshtrain]   OUT [bench/out/overlap]
#   IDLE_WAIT [120] IDLE_PCT [10]   NETNS_PREFIX [mt]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

CONFIG="${CONFIG:-b}"
RATE="${RATE:-1gbit}"
BUCKETS="${BUCKETS:-1 4 25 1024}"
STEPS="${STEPS:-16}"
SKIP="${SKIP:-5}"
THREADS="${THREADS:-1}"
ALGO="${ALGO:-ring}"
BASELINE="${BASELINE:-1}"
PIN="${PIN:-0}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/overlap}"
IDLE_WAIT="${IDLE_WAIT:-120}"
IDLE_PCT="${IDLE_PCT:-10}"
MESHTRAIN="$(realpath "$MESHTRAIN")"

[ -x "$MESHTRAIN" ] || { echo "meshtrain binary $MESHTRAIN not found (MESHTRAIN=...)"; exit 1; }
toml="examples/gpt-bench-$CONFIG.toml"
[ -f "$toml" ] || { echo "$toml not found"; exit 1; }
case "$CONFIG" in a) dims="4 256 128" ;; b) dims="6 384 256" ;; *) echo "CONFIG a or b"; exit 2 ;; esac
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"

source bench/idle.sh
source bench/netns/netns.sh
mkdir -p "$OUT"
results="$OUT/results.jsonl"
: > "$results"

trap 'netns_cleanup; exit 130' INT TERM
trap netns_cleanup EXIT
netns_up 2 "$RATE" || { echo "netns setup failed"; exit 1; }
echo "overlap: $(date -u +%Y-%m-%dT%H:%M:%SZ), config $CONFIG, 2 hosts x 1 worker x $THREADS thread(s), link $RATE" \
     "per host and direction, all_reduce=$ALGO, buckets $BUCKETS MiB, $STEPS steps (first $SKIP not counted)," \
     "$(getconf _NPROCESSORS_ONLN) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

pin=()  # PIN=1: taskset -c K before host K's worker

# run_one LABEL WORLD METRICS_TAG EXTRA_ARGS...
run_one() {
  local label="$1" world="$2"; shift 2
  local dir="$OUT/$label"
  rm -rf "$dir"; mkdir -p "$dir"
  local args=(train "$toml" "--training.steps=$STEPS" "--training.threads=$THREADS" "--training.log_every=1"
              "--training.out_dir=$dir/run" "--metrics.path=$dir/metrics.jsonl" "$@")
  echo "  $label: ${MESHTRAIN#$root/} ${args[*]}"
  wait_idle
  local t0=$SECONDS k
  netns_job_env "$world" 0
  for ((k = 0; k < world; k++)); do
    pin=(); [ "$PIN" = 1 ] && pin=(taskset -c "$k")
    netns_spawn "$k" "$k" "$dir/rank$k.log" "${pin[@]}" "$MESHTRAIN" "${args[@]}"
  done
  if ! netns_wait $((STEPS * 30 + 120)); then
    echo "    FAILED; last lines of rank 0's log ($dir/rank0.log):"; tail -n 5 "$dir/rank0.log" | sed 's/^/      /'
    return 1
  fi
  grep -m1 '^data parallel:' "$dir/rank0.log" | sed 's/^/    /'
  local line
  line="$(python3 bench/dp_metrics.py "$dir/metrics.jsonl" "$SKIP" $dims run="$label")" || { echo "    no metrics"; return 1; }
  echo "$line" >> "$results"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); s=sys.argv[2]
if "comm_ms" in r:
    print("    %.0f tokens/s, step %.0f ms, comm busy %.0f ms (%.0f%% of the step), exposed %.0f ms, hidden %.0f%% (pooled %.0f%%)  [%s s]" % (
        r["tokens_per_s"], r["step_ms"], r["comm_ms"], 100*r["comm_share_of_step"], r["comm_exposed_ms"],
        100*r["hidden_median"], 100*r["hidden_pooled"], s))
else:
    print("    %.0f tokens/s, step %.0f ms  [%s s]" % (r["tokens_per_s"], r["step_ms"], s))' "$line" "$((SECONDS - t0))"
}

[ "$BASELINE" = 1 ] && run_one "single" 1
for b in $BUCKETS; do
  run_one "bucket$b" 2 --parallel.data=allreduce --parallel.transport=tcp --parallel.all_reduce="$ALGO" \
    "--parallel.bucket_mb=$b"
done

echo
python3 - "$results" "$BUCKETS" "$RATE" "$CONFIG" <<'EOF'
import json, sys
rows = {r["run"]: r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip())}
buckets = sys.argv[2].split()
big = rows.get("bucket" + max(buckets, key=float))
single = rows.get("single")
print("config %s, link %s per host: hidden share target >= 80%%" % (sys.argv[4].upper(), sys.argv[3]))
print("| run | tokens/s | step ms | comm busy ms | comm / step | exposed ms | hidden (median) | hidden (pooled) | hidden vs one bucket | tokens/s / one bucket | tokens/s / (2 x single) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
if single:
    print("| 1 worker, no communication | %.0f | %.0f | | | | | | | | |" % (single["tokens_per_s"], single["step_ms"]))
for b in buckets:
    r = rows.get("bucket" + b)
    if not r:
        print("| bucket_mb=%s | FAILED | | | | | | | | | |" % b); continue
    rel = "%.2fx" % (r["tokens_per_s"] / big["tokens_per_s"]) if big and r is not big else "—"
    eff = "%.2f" % (r["tokens_per_s"] / (2 * single["tokens_per_s"])) if single else ""
    hid = r["hidden_median"]
    strict = "—" if r is big or not big else "%.0f%%" % (100 * (1 - r["comm_exposed_ms"] / big["comm_exposed_ms"]))
    print("| bucket_mb=%s%s | %.0f | %.0f | %.0f | %.0f%% | %.0f | **%.0f%%**%s | %.0f%% | %s | %s | %s |" % (
        b, " (one bucket)" if r is big else "", r["tokens_per_s"], r["step_ms"], r["comm_ms"],
        100 * r["comm_share_of_step"], r["comm_exposed_ms"], 100 * hid,
        "" if r is big else (" (met)" if hid >= 0.8 else " (not met)"), 100 * r["hidden_pooled"], strict, rel, eff))
EOF
echo "raw results: ${results#$root/}"
