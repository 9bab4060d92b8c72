#!/usr/bin/env bash
# Data-parallel scaling on this machine, and meshtrain against PyTorch DDP, in one run.
#
# Config $CONFIG (default b: examples/gpt-bench-b.toml, GPT L=6 d=384 h=6 ctx=256),
# per-worker batch 8, 1 compute thread per worker ($THREADS), runs
#   * meshtrain 1 worker x 1 thread:
#       meshtrain train examples/gpt-bench-b.toml --training.threads=1
#   * meshtrain 2 workers x 1 thread (synchronous data parallelism, shared memory
#     by default; MT_TRANSPORTS="shm tcp" adds a run over loopback TCP):
#       meshtrain launch --nproc 2 --transport shm -- meshtrain train examples/gpt-bench-b.toml \
#         --parallel.data=allreduce --training.threads=1
#   * PyTorch (bench/.venv) DistributedDataParallel, gloo backend, 2 processes x
#     1 thread, AdamW, per-worker batch 8 (bench/peers/torch_ddp_gpt.py), at each
#     setting of $DDP_SETTINGS; the best tokens/s is the peer figure
#   * PyTorch 1 process x 1 thread without DDP (bench/peers/torch_gpt.py), for
#     PyTorch's own scaling (PEERS without torch1 skips it)
# and prints global tokens/s (median over the timed steps), GFLOP/s (FLOPs per
# token = 6*N + 12*L*d*ctx, N = 12*L*d^2 + (V+ctx)*d, V the vocabulary) and the ratios
#   meshtrain 2x1 / meshtrain 1x1     (target >= 1.9x)
#   meshtrain 2x1 / best DDP 2x1      (target >= 1.5x)
# Results: bench/RESULTS.md, rows 18-19 (every run: bench/log/04-data-parallelism.md). Runtime with the
# defaults, config B: ~6 min (measured 327 s of runs; 2 meshtrain runs of ~30 s,
# 5 DDP runs of ~45 s (torch.compile: +15-70 s of compilation), 1 PyTorch
# 1x1 run), plus the waits for idle CPUs.
#
# Knobs (defaults in brackets):
#   CONFIG [b] a, b or gpt2 (GPT-2 small's shape: examples/gpt-bench-gpt2.toml, bench_config)
#   THREADS [1]  PEERS ["meshtrain ddp torch1"]
#   MT_STEPS [16] meshtrain --training.steps   MT_SKIP [5] first steps not counted
#   MT_TRANSPORTS [shm]   MT_BUCKET_MB [25] --parallel.bucket_mb   MT_ALGO [auto] --parallel.all_reduce
#   STEPS [12] timed PyTorch steps   WARMUP [3]   COMPILE_WARMUP [4] (includes compilation)
#   DDP_SETTINGS ["25:0:0:eager 25:1:0:eager 25:1:1:eager 100:1:1:eager 25:1:1:compile"]
#       each bucket_cap_mb:gradient_as_bucket_view:static_graph:eager|compile
#   TORCH_WAIT [unset] OMP_WAIT_POLICY for PyTorch   VENV_PY [bench/.venv/bin/python]
#   MESHTRAIN [build/src/meshtrain/meshtrain]   OUT [bench/out/data_parallel]
#   IDLE_WAIT [120] IDLE_PCT [10]  before each run, wait up to IDLE_WAIT s for the
#       CPUs to be under IDLE_PCT % busy (2 workers need both cores to themselves)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

CONFIG="${CONFIG:-b}"
THREADS="${THREADS:-1}"
PEERS="${PEERS:-meshtrain ddp torch1}"
MT_STEPS="${MT_STEPS:-16}"
MT_SKIP="${MT_SKIP:-5}"
MT_TRANSPORTS="${MT_TRANSPORTS:-shm}"
MT_BUCKET_MB="${MT_BUCKET_MB:-25}"
MT_ALGO="${MT_ALGO:-auto}"
STEPS="${STEPS:-12}"
WARMUP="${WARMUP:-3}"
COMPILE_WARMUP="${COMPILE_WARMUP:-4}"
DDP_SETTINGS="${DDP_SETTINGS:-25:0:0:eager 25:1:0:eager 25:1:1:eager 100:1:1:eager 25:1:1:compile}"
TORCH_WAIT="${TORCH_WAIT:-unset}"
VENV_PY="${VENV_PY:-$root/bench/.venv/bin/python}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/data_parallel}"
IDLE_WAIT="${IDLE_WAIT:-120}"
IDLE_PCT="${IDLE_PCT:-10}"

source bench/bench_lib.sh
bench_config "$CONFIG"
bench_threads "$THREADS"
bench_results

echo "data_parallel: $(date -u +%Y-%m-%dT%H:%M:%SZ), config $CONFIG (L=$L d=$D heads=$H ctx=$C, batch $B per worker)," \
     "$THREADS thread(s) per worker, $(getconf _NPROCESSORS_ONLN) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"

# run_meshtrain LABEL NPROC TRANSPORT
run_meshtrain() {
  local label="$1" nproc="$2" transport="$3"
  bench_need "$label" "$MESHTRAIN" "MESHTRAIN=..." || return
  local dir="$OUT/$label"; rm -rf "$dir"; mkdir -p "$dir"
  local train=("$MESHTRAIN" train "$toml" "--training.steps=$MT_STEPS" "--training.threads=$THREADS"
               "--training.log_every=1" "--training.out_dir=$dir/run" "--metrics.path=$dir/metrics.jsonl")
  local dp=()
  [ "$nproc" -gt 1 ] && mapfile -t dp < <(bench_mt_dp_flags "$transport" "$MT_BUCKET_MB" "$MT_ALGO")
  bench_mt_cmd "$nproc" "$transport" "${train[@]}" "${dp[@]}"
  bench_run "$label" "$dir/log" "${mt_cmd[@]}" || return
  local line
  line="$(bench_mt_metrics "$dir/metrics.jsonl" "$MT_SKIP" "$L" "$D" "$C" "vocab=$V")" || { echo "    no metrics"; return; }
  bench_record "$line" "runner=$label"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])
extra = "" if "comm_ms" not in r else ", comm busy %.0f ms/step, exposed %.0f ms, hidden %.0f%%" % (r["comm_ms"], r["comm_exposed_ms"], 100*(r["hidden_median"] or 0))
print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms over %d steps%s  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms"], r["steps_timed"], extra, sys.argv[2]))' "$line" "$(bench_elapsed)"
}

# run_torch LABEL PEER ARGS...: the peer bench/peers/PEER under $VENV_PY
run_torch() {
  local label="$1"; shift
  bench_need "$label" "$VENV_PY" "run bench/setup-venv.sh" || return
  if bench_run_peer "$label" "$OUT/$label" "$VENV_PY" "$@"; then
    bench_record "$peer_line" "runner=$label"
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms (first step %.1f s, warm-up %.1f s)  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms_median"], r["first_step_s"] or 0, r["warmup_s"], sys.argv[2]))' "$peer_line" "$(bench_elapsed)"
  else
    bench_failed "$OUT/$label.err"
  fi
}

mapfile -t model < <(bench_peer_model "$L" "$D" "$H" "$C" "$B" "$THREADS" "$TORCH_WAIT" sdpa; printf "%s\n" --vocab-size "$V" --precision "$PREC")
for p in $PEERS; do
  case "$p" in
    meshtrain)
      run_meshtrain "meshtrain-1x$THREADS" 1 none
      for t in $MT_TRANSPORTS; do run_meshtrain "meshtrain-2x$THREADS-$t" 2 "$t"; done ;;
    ddp)
      for s in $DDP_SETTINGS; do
        IFS=: read -r cap gv sg mode <<< "$s"
        args=(torch_ddp_gpt.py --nproc 2 "${model[@]}" --steps "$STEPS" --mode "$mode"
              --warmup "$([ "$mode" = compile ] && echo "$COMPILE_WARMUP" || echo "$WARMUP")" --bucket-cap-mb "$cap" --json)
        [ "$gv" = 1 ] && args+=(--grad-as-view)
        [ "$sg" = 1 ] && args+=(--static-graph)
        run_torch "ddp-2x$THREADS-b$cap-gv$gv-sg$sg-$mode" "${args[@]}"
      done ;;
    torch1)
      run_torch "torch-1x$THREADS-eager" torch_gpt.py "${model[@]}" --steps "$STEPS" \
        --warmup "$WARMUP" --mode eager --json ;;
    *) echo "unknown peer $p (meshtrain ddp torch1)"; exit 2 ;;
  esac
done

echo
python3 - "$results" "$CONFIG" "$THREADS" "$B" "$PREC" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cfg, t, batch, prec = sys.argv[2].upper(), sys.argv[3], sys.argv[4], sys.argv[5]
by = {r["runner"]: r for r in rows}
mt1 = by.get("meshtrain-1x" + t)
mt2 = [r for r in rows if r["runner"].startswith("meshtrain-2x")]
ddp = [r for r in rows if r["runner"].startswith("ddp-")]
best_ddp = max(ddp, key=lambda r: r["tokens_per_s"]) if ddp else None
def name(r):
    n = r["runner"]
    if n.startswith("ddp-"):
        return "PyTorch %s DDP gloo 2x%s, bucket_cap_mb=%g%s%s, %s" % (
            r["torch"].split("+")[0], t, r["bucket_cap_mb"], ", grad-as-bucket-view" if r["gradient_as_bucket_view"] else "",
            ", static_graph" if r["static_graph"] else "", "torch.compile" if r["mode"] == "compile" else "eager")
    if n.startswith("torch-"):
        return "PyTorch %s 1x%s (no DDP), eager" % (r["torch"].split("+")[0], t)
    if n.startswith("meshtrain-1x"):
        return "meshtrain 1x%s" % t
    if n.startswith("meshtrain-2x"):
        return "meshtrain 2x%s (%s)" % (t, n.rsplit("-", 1)[1])
    return n
print("config %s, per-worker batch %s, %s thread(s) per worker, %s" % (cfg, batch, t, prec))
print("| runner | tokens/s (global) | per-step min-max | GFLOP/s | meshtrain 2x%s / runner |" % t)
print("|---|---|---|---|---|")
main = next((r for r in mt2 if r["runner"].endswith("-shm")), mt2[0] if mt2 else None)
for r in rows:
    ratio = "—"
    if main is not None and r is not main:
        x = main["tokens_per_s"] / r["tokens_per_s"]
        ratio = "%.2fx" % x
        if r is mt1: ratio = "**%.3fx** (scaling, target 1.9x: %s)" % (x, "met" if x >= 1.9 else "not met")
        if r is best_ddp: ratio = "**%.2fx** (best DDP, target 1.5x: %s)" % (x, "met" if x >= 1.5 else "not met")
    spread = "%.0f-%.0f" % (r["tokens_per_s_min"], r["tokens_per_s_max"]) if "tokens_per_s_min" in r else ""
    print("| %s | %.0f | %s | %.1f | %s |" % (name(r), r["tokens_per_s"], spread, r["gflops"], ratio))
torch1 = next((r for r in rows if r["runner"].startswith("torch-1x")), None)
if best_ddp and torch1:
    print("PyTorch's own scaling: best DDP 2x%s / PyTorch 1x%s = %.2fx" % (t, t, best_ddp["tokens_per_s"] / torch1["tokens_per_s"]))
print("(a per-step minimum far below the median means other work ran during that run: rerun it)")
if main and "hidden_median" in main:
    print("meshtrain 2x%s: comm busy %.0f ms/step, exposed %.0f ms, hidden %.0f%% (median)" % (
        t, main["comm_ms"], main["comm_exposed_ms"], 100 * (main["hidden_median"] or 0)))
EOF
echo "raw results: ${results#$root/}"
