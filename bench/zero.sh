#!/usr/bin/env bash
# ZeRO on this machine: meshtrain's --parallel.zero_stage 0-3 against PyTorch's DDP,
# ZeroRedundancyOptimizer and FSDP, in one run.
#
# Config $CONFIG (default b: examples/gpt-bench-b.toml, GPT L=6 d=384 h=6 ctx=256),
# 2 workers x 1 compute thread ($THREADS), per-worker batch 8, AdamW; runs
#   * meshtrain at each ZeRO stage S of $MT_STAGES (shared memory by default):
#       meshtrain launch --nproc 2 --transport shm -- meshtrain train examples/gpt-bench-b.toml \
#         --training.threads=1 --training.steps=16 --parallel.data=allreduce --parallel.zero_stage=S \
#         --parallel.transport=shm --parallel.bucket_mb=25 --parallel.all_reduce=auto
#     (the data_parallel.sh command plus the stage; the stage "none" leaves the flag out, for builds
#     from before it, and stands in for stage 0)
#   * PyTorch (bench/.venv), gloo backend, 2 processes x 1 thread (bench/peers/torch_zero_gpt.py),
#     each mode of $TORCH_MODES with PyTorch's defaults: ddp (DistributedDataParallel), zero1 (DDP +
#     ZeroRedundancyOptimizer(optimizer_class=AdamW)), fsdp (FSDP2 fully_shard per block and on the
#     root; the FullyShardedDataParallel wrapper if that fails; exit status 3, reported, if neither
#     can run on CPU/gloo)
# and prints global tokens/s (median over the timed steps), GFLOP/s (as data_parallel.sh), rank 0's
# median bytes sent+received in collectives per step (meshtrain's comm_bytes), peak RSS, and the ratios
#   meshtrain stage 1 / ZeroRedundancyOptimizer                     (target >= 1.5x)
#   meshtrain stage 3 / FSDP                                        (target >= 1.5x)
#     or, when FSDP cannot run here, meshtrain stage 3 / DDP         (target >= 1.2x)
#   meshtrain stage 0 / DDP
#   meshtrain comm_bytes stage 3 / stage 0     (the ZeRO paper's 1.5x: all-gather twice + reduce-scatter
#                                               against one all-reduce = reduce-scatter + all-gather)
# Runtime with the defaults, config B: ~5 min (estimate: 4 meshtrain runs of ~35 s, 3 PyTorch runs of
# ~50 s), plus the waits for idle CPUs.
#
# Knobs (defaults in brackets):
#   CONFIG [b] a, b or gpt2 (GPT-2 small's shape: examples/gpt-bench-gpt2.toml, bench_config)
#   THREADS [1]  PEERS ["meshtrain torch"]
#   MT_STAGES ["0 1 2 3"] (none: no --parallel.zero_stage)   MT_STEPS [16] meshtrain --training.steps
#   MT_SKIP [5] first steps not counted   MT_TRANSPORT [shm]   MT_BUCKET_MB [25] --parallel.bucket_mb
#   MT_ALGO [auto] --parallel.all_reduce
#   TORCH_MODES ["ddp zero1 fsdp"]   STEPS [12] timed PyTorch steps   WARMUP [3]
#   TORCH_WAIT [unset] OMP_WAIT_POLICY for PyTorch   VENV_PY [bench/.venv/bin/python]
#   MESHTRAIN [build/src/meshtrain/meshtrain]   OUT [bench/out/zero]
#   IDLE_WAIT [120] IDLE_PCT [10]  before each run, wait up to IDLE_WAIT s for the
#       CPUs to be under IDLE_PCT % busy (2 workers need both cores to themselves)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

CONFIG="${CONFIG:-b}"
THREADS="${THREADS:-1}"
PEERS="${PEERS:-meshtrain torch}"
MT_STAGES="${MT_STAGES:-0 1 2 3}"
MT_STEPS="${MT_STEPS:-16}"
MT_SKIP="${MT_SKIP:-5}"
MT_TRANSPORT="${MT_TRANSPORT:-shm}"
MT_BUCKET_MB="${MT_BUCKET_MB:-25}"
MT_ALGO="${MT_ALGO:-auto}"
TORCH_MODES="${TORCH_MODES:-ddp zero1 fsdp}"
STEPS="${STEPS:-12}"
WARMUP="${WARMUP:-3}"
TORCH_WAIT="${TORCH_WAIT:-unset}"
VENV_PY="${VENV_PY:-$root/bench/.venv/bin/python}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/zero}"
IDLE_WAIT="${IDLE_WAIT:-120}"
IDLE_PCT="${IDLE_PCT:-10}"

source bench/bench_lib.sh
bench_config "$CONFIG"
bench_threads "$THREADS"
bench_results

echo "zero: $(date -u +%Y-%m-%dT%H:%M:%SZ), config $CONFIG (L=$L d=$D heads=$H ctx=$C, batch $B per worker)," \
     "2 workers x $THREADS thread(s), $(getconf _NPROCESSORS_ONLN) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"

# run_meshtrain STAGE  (none: without --parallel.zero_stage)
run_meshtrain() {
  local stage="$1" label="meshtrain-2x$THREADS-z$1"
  bench_need "$label" "$MESHTRAIN" "MESHTRAIN=..." || return
  local dir="$OUT/$label"; rm -rf "$dir"; mkdir -p "$dir"
  local dp
  mapfile -t dp < <(bench_mt_dp_flags "$MT_TRANSPORT" "$MT_BUCKET_MB" "$MT_ALGO")
  bench_mt_cmd 2 "$MT_TRANSPORT" "$MESHTRAIN" train "$toml" "--training.steps=$MT_STEPS" "--training.threads=$THREADS" \
    "--training.log_every=1" "--training.out_dir=$dir/run" "--metrics.path=$dir/metrics.jsonl" "${dp[@]}"
  [ "$stage" = none ] || mt_cmd+=("--parallel.zero_stage=$stage")
  bench_run --rss "$dir/maxrss_kib" "$label" "$dir/log" "${mt_cmd[@]}" || return
  local line rss
  rss="$(tail -n 1 "$dir/maxrss_kib" 2>/dev/null)"
  line="$(bench_mt_metrics "$dir/metrics.jsonl" "$MT_SKIP" "$L" "$D" "$C" "vocab=$V" \
          "zero_stage=$stage" ${rss:+"peak_rss_kib=$rss"})" || { echo "    no metrics"; return; }
  bench_record "$line" "runner=$label"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])
extra = "" if r.get("comm_bytes") is None else ", comm %.1f MB/step (rank 0)" % (r["comm_bytes"] / 1e6)
extra += "" if "peak_rss_kib" not in r else ", peak RSS %.0f MiB" % (int(r["peak_rss_kib"]) / 1024)
print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms over %d steps%s  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms"], r["steps_timed"], extra, sys.argv[2]))' "$line" "$(bench_elapsed)"
}

# run_torch MODE
run_torch() {
  local mode="$1" label="torch-$1-2x$THREADS"
  bench_need "$label" "$VENV_PY" "run bench/setup-venv.sh" || return
  local model
  mapfile -t model < <(bench_peer_model "$L" "$D" "$H" "$C" "$B" "$THREADS" "$TORCH_WAIT" sdpa; printf "%s\n" --vocab-size "$V" --precision "$PREC")
  if bench_run_peer "$label" "$OUT/$label" "$VENV_PY" torch_zero_gpt.py --mode "$mode" --nproc 2 "${model[@]}" \
       --steps "$STEPS" --warmup "$WARMUP" --json; then
    bench_record "$peer_line" "runner=$label"
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms (first step %.1f s)%s, peak RSS %s MiB, local params %s MiB, AdamW state %s MiB  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms_median"], r["first_step_s"] or 0, ", " + r["fsdp_api"] if r["fsdp_api"] else "", "/".join("%.0f" % x for x in r["peak_rss_mib_per_rank"]), "/".join("%.1f" % x for x in r["param_mib_per_rank"]), "/".join("%.1f" % x for x in r["optim_state_mib_per_rank"]), sys.argv[2]))' "$peer_line" "$(bench_elapsed)"
  elif [ "$peer_rc" = 3 ]; then  # the peer's "cannot run here" status (FSDP on CPU/gloo)
    local why; why="$(grep -v '^{' "$OUT/$label.out" | tail -n 1)"
    echo "    CANNOT RUN: $why"
    bench_record "$(python3 -c 'import json,sys; print(json.dumps({"mode": sys.argv[1], "unsupported": sys.argv[2]}))' "$mode" "$why")" "runner=$label"
  else
    bench_failed "$OUT/$label.err" 5 "(status $peer_rc)"
  fi
}

for p in $PEERS; do
  case "$p" in
    meshtrain) for s in $MT_STAGES; do run_meshtrain "$s"; done ;;
    torch) for m in $TORCH_MODES; do run_torch "$m"; done ;;
    *) echo "unknown peer $p (meshtrain torch)"; exit 2 ;;
  esac
done

echo
python3 - "$results" "$CONFIG" "$THREADS" "$B" "$PREC" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cfg, t, batch, prec = sys.argv[2].upper(), sys.argv[3], sys.argv[4], sys.argv[5]
by = {r["runner"]: r for r in rows}
mt = lambda s: by.get("meshtrain-2x%s-z%s" % (t, s))
torch = lambda m: by.get("torch-%s-2x%s" % (m, t))
stage = {s: mt(s) for s in "0123"}
stage["0"] = stage["0"] or mt("none")  # the run without the flag stands in for stage 0
ddp, zero1, fsdp = torch("ddp"), torch("zero1"), torch("fsdp")

def name(r):
    if r["runner"].startswith("meshtrain-"):
        z = r.get("zero_stage", "?")
        return "meshtrain 2x%s, %s" % (t, "no zero_stage flag" if z == "none" else "ZeRO stage " + z)
    v = " ".join(["PyTorch"] + r["torch"].split("+")[:1]) if "torch" in r else "PyTorch"
    return {"ddp": "%s DDP gloo 2x%s (AdamW replicated)" % (v, t),
            "zero1": "%s DDP + ZeroRedundancyOptimizer(AdamW), gloo 2x%s" % (v, t),
            "fsdp": "%s FSDP (%s) gloo 2x%s" % (v, r.get("fsdp_api") or "cannot run", t)}[r["mode"]]

print("config %s, per-worker batch %s, 2 workers x %s thread(s), %s" % (cfg, batch, t, prec))
print("| runner | tokens/s (global) | per-step min-max | GFLOP/s | comm MB/step (rank 0) | peak RSS MiB | local params / AdamW state MiB |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    if "unsupported" in r:
        print("| %s | — | | | | | cannot run here (below) |" % name(r))
        continue
    comm = "%.1f" % (r["comm_bytes"] / 1e6) if r.get("comm_bytes") is not None else ""
    if "peak_rss_kib" in r:
        rss = "%.0f (largest rank)" % (int(r["peak_rss_kib"]) / 1024)
    elif "peak_rss_mib_per_rank" in r:
        rss = "/".join("%.0f" % x for x in r["peak_rss_mib_per_rank"])
    else:
        rss = ""
    state = ("%.1f / %.1f" % (r["param_mib_per_rank"][0], r["optim_state_mib_per_rank"][0])
             if "param_mib_per_rank" in r else "")
    print("| %s | %.0f | %.0f-%.0f | %.1f | %s | %s | %s |" % (
        name(r), r["tokens_per_s"], r["tokens_per_s_min"], r["tokens_per_s_max"], r["gflops"], comm, rss, state))
print("(a per-step minimum far below the median means other work ran during that run: rerun it)")
print()

def ratio(what, a, b, target=None):
    if not a or not b or "tokens_per_s" not in a or "tokens_per_s" not in b:
        print("%s: n/a (a run is missing or failed)" % what)
        return
    x = a["tokens_per_s"] / b["tokens_per_s"]
    tail = "" if target is None else " (target %.1fx: %s)" % (target, "met" if x >= target else "NOT met")
    print("%s: %.2fx%s" % (what, x, tail))

ratio("meshtrain stage 1 / ZeroRedundancyOptimizer", stage["1"], zero1, 1.5)
if fsdp and "unsupported" not in fsdp:
    ratio("meshtrain stage 3 / FSDP (%s)" % fsdp["fsdp_api"], stage["3"], fsdp, 1.5)
else:
    if fsdp:
        print("FSDP cannot run here: %s" % fsdp["unsupported"])
    ratio("meshtrain stage 3 / DDP (FSDP did not run)", stage["3"], ddp, 1.2)
ratio("meshtrain stage 0 / DDP", stage["0"], ddp)
for s in "123":
    if stage[s] and stage["0"]:
        ratio("meshtrain stage %s / stage 0 (cost of sharding)" % s, stage[s], stage["0"])
c0 = (stage["0"] or {}).get("comm_bytes")
for s in "123":
    cs = (stage[s] or {}).get("comm_bytes")
    if c0 and cs is not None:
        print("meshtrain comm bytes stage %s / stage 0: %.2fx%s" % (
            s, cs / c0, " (ZeRO paper: 1.5x)" if s == "3" else ""))
if c0 is None and stage["0"]:
    print("meshtrain comm bytes: the metrics carry no comm_bytes")
EOF
echo "raw results: ${results#$root/}"
