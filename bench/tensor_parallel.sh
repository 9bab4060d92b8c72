#!/usr/bin/env bash
# Tensor parallelism on this machine: meshtrain's parallel.tensor = 2 against one process and against
# PyTorch's own tensor parallelism, in alternating runs.
#
# Config $CONFIG (default b: examples/gpt-bench-b.toml, GPT L=6 d=384 h=6 ctx=256), batch 8, 1 compute
# thread per process ($THREADS). Each round runs
#   * meshtrain 1 process x 1 thread:
#       meshtrain train examples/gpt-bench-b.toml --training.threads=1 --training.steps=16
#   * meshtrain tensor = 2 on 2 processes x 1 thread (one tensor-parallel group, 1 data way, the same
#     batch of 8 as one process), from a TOML generated into $OUT: examples/gpt-bench-b.toml with
#     training.threads = 1 and [parallel] data = "allreduce", workers = 2, tensor = 2, transport = shm:
#       meshtrain launch --nproc 2 --transport shm -- meshtrain train bench/out/tensor_parallel/tp2.toml \
#         --training.steps=16
#   * PyTorch (bench/.venv) tensor parallelism, gloo, 2 processes x 1 thread (bench/peers/torch_tp_gpt.py:
#     parallelize_module on a 1-D DeviceMesh("cpu"), ColwiseParallel c_attn / c_fc, RowwiseParallel
#     attention-out / MLP-down, n_head/2 heads per rank): in round 1 at every setting of $TP_SETTINGS, in
#     later rounds at the one that was fastest in round 1 (PyTorch's "best setting")
#   * round 1 only: PyTorch 1 process x 1 thread without TP (bench/peers/torch_gpt.py), for PyTorch's own
#     scaling (PEERS without torch1 skips it)
# and prints global tokens/s (median over the timed steps; all ranks of a tensor-parallel group share one
# batch, so tokens per step = batch * ctx; meshtrain's from its step_ms), GFLOP/s (FLOPs per token =
# 6*N + 12*L*d*ctx, N = 12*L*d^2 + (V+ctx)*d, V the vocabulary), rank 0's parameter + optimizer-state
# memory (meshtrain: peak_parameters_mb + peak_optimizer_state_mb of its metrics; PyTorch: the local
# shards' bytes) and the largest rank's peak RSS, then, over the rounds' medians,
#   meshtrain tp2 / meshtrain 1 process                         (target >= 1.7x)
#   meshtrain tp2 / PyTorch TP at its best setting              (target >= 1.5x)
#   meshtrain tp2 rank 0 params+optimizer / 1 process's         (target <= 55%)
# Runtime with the defaults, config B: ~10 min (estimate: round 1 ~8 min: 2 meshtrain runs of ~20-30 s,
# 5 PyTorch runs of ~40 s of which 2 with torch.compile (+60-120 s compiling), PyTorch 1x1 ~40 s;
# round 2 ~1.5 min), plus the waits for idle CPUs.
#
# Knobs (defaults in brackets):
#   CONFIG [b] a, b or gpt2 (GPT-2 small's shape: examples/gpt-bench-gpt2.toml, bench_config)
#   THREADS [1]  TP [2] tensor-parallel ways (= processes)  ROUNDS [2]
#   PRECISION [the config's: fp32 for a and b, bf16 for gpt2] fp32 | bf16: meshtrain --training.precision=bf16, the peers --precision bf16 (forward
#       and loss under torch.autocast); bf16 also measures the machine's bf16 GEMM rate
#       (build/bench/bench_gemm --bf16-peak) and reports meshtrain's GFLOP/s as a share of it
#   PEERS ["meshtrain torchtp torch1"]
#   MODEL [unset] "L D H CTX BATCH" overrides the config's model and batch (smoke tests:
#       MODEL="2 64 4 32 4" MT_STEPS=4 MT_SKIP=1 STEPS=3 WARMUP=1 COMPILE_WARMUP=1)
#   MT_STEPS [16] meshtrain --training.steps   MT_SKIP [5] first steps not counted   MT_TRANSPORT [shm]
#   STEPS [12] timed PyTorch steps   WARMUP [3]   COMPILE_WARMUP [4] (includes compilation)
#   TP_SETTINGS ["replicated:eager:fused parallel:eager:fused replicated:compile:fused parallel:compile:fused
#       replicated:eager:auto"]  each vocab:mode:optim of torch_tp_gpt.py (--vocab replicated: embedding and
#       tied head whole on every rank; parallel: vocabulary-parallel embedding, loss_parallel cross-entropy;
#       --optim auto: PyTorch's default AdamW on CPU (a loop over the tensors), fused: fused=True)
#   TORCH_WAIT [unset] OMP_WAIT_POLICY for PyTorch   VENV_PY [bench/.venv/bin/python]
#   MESHTRAIN [build/src/meshtrain/meshtrain]   OUT [bench/out/tensor_parallel]
#   IDLE_WAIT [120] IDLE_PCT [10]  before each run, wait up to IDLE_WAIT s for the
#       CPUs to be under IDLE_PCT % busy (2 processes need both cores to themselves)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

CONFIG="${CONFIG:-b}"
THREADS="${THREADS:-1}"
TP="${TP:-2}"
ROUNDS="${ROUNDS:-2}"
PRECISION="${PRECISION:-}"  # after bench_config: the config's own
PEERS="${PEERS:-meshtrain torchtp torch1}"
MODEL="${MODEL:-}"
MT_STEPS="${MT_STEPS:-16}"
MT_SKIP="${MT_SKIP:-5}"
MT_TRANSPORT="${MT_TRANSPORT:-shm}"
STEPS="${STEPS:-12}"
WARMUP="${WARMUP:-3}"
COMPILE_WARMUP="${COMPILE_WARMUP:-4}"
TP_SETTINGS="${TP_SETTINGS:-replicated:eager:fused parallel:eager:fused replicated:compile:fused parallel:compile:fused replicated:eager:auto}"
TORCH_WAIT="${TORCH_WAIT:-unset}"
VENV_PY="${VENV_PY:-$root/bench/.venv/bin/python}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/tensor_parallel}"
IDLE_WAIT="${IDLE_WAIT:-120}"
IDLE_PCT="${IDLE_PCT:-10}"

source bench/bench_lib.sh
bench_config "$CONFIG"
PRECISION="${PRECISION:-$PREC}"
[ -n "$MODEL" ] && read -r L D H C B <<< "$MODEL"
if [ $((H % TP)) -ne 0 ] || [ $((D % TP)) -ne 0 ]; then echo "heads $H and d $D must divide by TP=$TP"; exit 2; fi
bench_threads "$THREADS"
bench_results

cpu_model="$(bench_cpu_model)"
cpu_flags="$(bench_cpu_flags avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16)"
torch_version="$(bench_torch_version "$VENV_PY" "not found")"
echo "tensor_parallel: $(date -u +%Y-%m-%dT%H:%M:%SZ), config $CONFIG (L=$L d=$D heads=$H ctx=$C, batch $B)," \
     "tensor $TP on $TP processes x $THREADS thread(s) against 1 process, $ROUNDS round(s)," \
     "$(getconf _NPROCESSORS_ONLN) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "precision $PRECISION"
bf16_peak_2=""
[ "$PRECISION" = bf16 ] && bench_bf16_peak "$OUT/gemm.txt"
echo "CPU: $cpu_model; flags: ${cpu_flags:-none of avx2/avx512/amx}; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>};" \
     "PyTorch (bench/.venv): $torch_version"

# The tensor-parallel job: the config with threads and a [parallel] table (the example has none).
tp_toml="$OUT/tp$TP.toml"
{
  sed "s/^threads = .*/threads = $THREADS/" "$toml"
  printf '\n[parallel]\ndata = "allreduce"\nworkers = %d\ntensor = %d\ntransport = "%s"\n' "$TP" "$TP" "$MT_TRANSPORT"
} > "$tp_toml"

# One meshtrain run's figures from its metrics: medians over the step records after MT_SKIP, tokens/s
# from step_ms (tokens per step = batch * data ways * ctx; data ways = workers / tensor = 1 here), the
# metrics' own tokens_per_s beside it, and the last ("memory": "peak") record's peaks of rank 0. (Not
# bench_mt_metrics, which takes the metrics' tokens_per_s: a tensor-parallel job's may count another
# number of tokens per step; the run's line says so when it does.)
mt_summary() {  # metrics.jsonl tokens_per_step [key=value ...]
  python3 - "$@" <<'EOF'
import json, statistics, sys
path, tokens = sys.argv[1], int(sys.argv[2])
extra = dict(kv.split("=", 1) for kv in sys.argv[3:])
steps, peak = [], None
for ln in open(path):
    if not ln.strip():
        continue
    r = json.loads(ln)
    if "step_ms" in r:
        steps.append(r)
    if r.get("memory") == "peak":
        peak = r
steps.sort(key=lambda r: r["step"])
skip = int(extra.pop("skip"))
timed = steps[skip:] if len(steps) > skip else steps
if not timed:
    sys.exit("no step records in " + path)
L, d, ctx, vocab = (int(extra.pop(k)) for k in ("L", "d", "ctx", "vocab"))
sys.path.insert(0, "bench")
from model_flops import flops_per_token, params
n, fpt = params(L, d, ctx, vocab), flops_per_token(L, d, ctx, vocab)
tps = [tokens / (r["step_ms"] / 1e3) for r in timed]
med = statistics.median(tps)
out = {"tokens_per_s": round(med, 1), "tokens_per_s_min": round(min(tps), 1), "tokens_per_s_max": round(max(tps), 1),
       "gflops": round(med * fpt / 1e9, 2), "step_ms": round(statistics.median(r["step_ms"] for r in timed), 1),
       "steps_timed": len(timed), "loss_first": steps[0].get("loss"), "loss_last": timed[-1].get("loss"),
       "workers": timed[-1].get("workers", 1), "N": n, "flops_per_token": fpt}
if all("tokens_per_s" in r for r in timed):
    out["metrics_tokens_per_s"] = round(statistics.median(r["tokens_per_s"] for r in timed), 1)
if all("comm_bytes" in r for r in timed):
    out["comm_bytes"] = statistics.median(r["comm_bytes"] for r in timed)
if peak:
    for k in ("parameters", "gradients", "optimizer_state", "activations", "total"):
        if "peak_%s_mb" % k in peak:
            out["peak_%s_mb" % k] = round(peak["peak_%s_mb" % k], 3)
out.update(extra)
print(json.dumps(out))
EOF
}

# run_meshtrain LABEL ROUND NPROC
run_meshtrain() {
  local label="$1" round="$2" nproc="$3"
  bench_need "$label" "$MESHTRAIN" "MESHTRAIN=..." || return
  local dir="$OUT/$label-r$round"; rm -rf "$dir"; mkdir -p "$dir"
  local job="$toml"
  [ "$nproc" -gt 1 ] && job="$tp_toml"
  local train=("$MESHTRAIN" train "$job" "--training.steps=$MT_STEPS" "--training.threads=$THREADS"
               "--training.log_every=1" "--training.precision=$PRECISION" "--training.out_dir=$dir/run" "--metrics.path=$dir/metrics.jsonl")
  [ -n "$MODEL" ] && train+=("--model.n_layer=$L" "--model.n_embd=$D" "--model.n_head=$H" "--model.block_size=$C"
                             "--training.batch_size=$B")
  bench_mt_cmd "$nproc" "$MT_TRANSPORT" "${train[@]}"
  bench_run --rss "$dir/maxrss_kib" "$label" "$dir/log" "${mt_cmd[@]}" || return
  local line rss
  rss="$(tail -n 1 "$dir/maxrss_kib" 2>/dev/null)"
  line="$(mt_summary "$dir/metrics.jsonl" "$((B * C))" "skip=$MT_SKIP" "L=$L" "d=$D" "ctx=$C" "vocab=$V" "nproc=$nproc" \
          "tensor=$([ "$nproc" -gt 1 ] && echo "$TP" || echo 1)" ${rss:+"peak_rss_kib=$rss"})" \
    || { echo "    no metrics"; return; }
  bench_record "$line" "runner=$label" "round:=$round"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])
extra = ""
if "peak_parameters_mb" in r:
    extra += ", rank 0 params %.1f + optimizer %.1f MiB" % (r["peak_parameters_mb"], r.get("peak_optimizer_state_mb", 0))
if "peak_rss_kib" in r:
    extra += ", peak RSS %.0f MiB" % (int(r["peak_rss_kib"]) / 1024)
m = r.get("metrics_tokens_per_s")
if m and abs(m / r["tokens_per_s"] - 1) > 0.02:
    extra += " (the metrics say %.0f tokens/s: they count another number of tokens per step)" % m
print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms over %d steps, loss %.3f -> %.3f%s  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms"], r["steps_timed"], r["loss_first"] or 0, r["loss_last"] or 0, extra, sys.argv[2]))' "$line" "$(bench_elapsed)"
}

# run_torch LABEL ROUND PEER ARGS...: the peer bench/peers/PEER under $VENV_PY
run_torch() {
  local label="$1" round="$2"; shift 2
  bench_need "$label" "$VENV_PY" "run bench/setup-venv.sh" || return
  if bench_run_peer "$label" "$OUT/$label-r$round" "$VENV_PY" "$@"; then
    bench_record "$peer_line" "runner=$label" "round:=$round"
    python3 -c 'import json,sys; r=json.loads(sys.argv[1])
extra = ""
if "param_mib_per_rank" in r:
    extra = ", rank 0 params %.1f + AdamW %.1f MiB (%.0f%% of the whole model'"'"'s), peak RSS %s MiB" % (r["param_mib_per_rank"][0], r["optim_state_mib_per_rank"][0], 100 * r["param_optim_share_rank0"], "/".join("%.0f" % x for x in r["peak_rss_mib_per_rank"]))
if r.get("compiled") == "each block":
    extra += ", compiled per block"
print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms (first step %.1f s), loss %.3f -> %.3f%s  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms_median"], r["first_step_s"] or 0, r["loss_first"], r["loss_last"], extra, sys.argv[2]))' "$peer_line" "$(bench_elapsed)"
  else
    bench_failed "$OUT/$label-r$round.err"
  fi
}

mapfile -t model < <(bench_peer_model "$L" "$D" "$H" "$C" "$B" "$THREADS" "$TORCH_WAIT" sdpa; echo --vocab-size; echo "$V")
run_tp_setting() {  # round vocab:mode:optim
  local vocab mode optim
  IFS=: read -r vocab mode optim <<< "$2"
  run_torch "torchtp-${TP}x$THREADS-$vocab-$mode-$optim" "$1" torch_tp_gpt.py --nproc "$TP" \
    "${model[@]}" --steps "$STEPS" --warmup "$([ "$mode" = compile ] && echo "$COMPILE_WARMUP" || echo "$WARMUP")" \
    --mode "$mode" --vocab "$vocab" --optim "$optim" --precision "$PRECISION" --json
}

best_tp_setting() {  # the fastest torchtp setting of round 1, as vocab:mode:optim
  python3 -c 'import json,sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tp = [r for r in rows if r["runner"].startswith("torchtp-") and r["round"] == 1]
if tp:
    b = max(tp, key=lambda r: r["tokens_per_s"])
    print("%s:%s:%s" % (b["vocab"], b["mode"], b["optim"]))' "$results"
}

for round in $(seq 1 "$ROUNDS"); do
  echo "round $round"
  for p in $PEERS; do
    case "$p" in
      meshtrain)
        run_meshtrain "meshtrain-1x$THREADS" "$round" 1
        run_meshtrain "meshtrain-tp$TP-${TP}x$THREADS" "$round" "$TP" ;;
      torchtp)
        if [ "$round" = 1 ]; then
          for s in $TP_SETTINGS; do run_tp_setting "$round" "$s"; done
        else
          best="$(best_tp_setting)"
          if [ -n "$best" ]; then run_tp_setting "$round" "$best"; else echo "  PyTorch TP: no setting ran in round 1"; fi
        fi ;;
      torch1)
        [ "$round" = 1 ] && run_torch "torch-1x$THREADS-eager" "$round" torch_gpt.py "${model[@]}" \
          --steps "$STEPS" --warmup "$WARMUP" --mode eager --precision "$PRECISION" --json ;;
      *) echo "unknown peer $p (meshtrain torchtp torch1)"; exit 2 ;;
    esac
  done
done

echo
python3 - "$results" "$CONFIG" "$THREADS" "$TP" "$B" "$MODEL" "$PRECISION" "$bf16_peak_2" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cfg, t, tp, batch, custom = sys.argv[2].upper(), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
precision, bf16_peak = sys.argv[7], float(sys.argv[8] or 0)
mt1_label, mttp_label = "meshtrain-1x" + t, "meshtrain-tp%d-%dx%s" % (tp, tp, t)
runners = []
for r in rows:
    if r["runner"] not in runners:
        runners.append(r["runner"])
runs = {n: [r for r in rows if r["runner"] == n] for n in runners}
tps = {n: statistics.median(r["tokens_per_s"] for r in rs) for n, rs in runs.items()}
torchtp = [n for n in runners if n.startswith("torchtp-")]
# PyTorch's best setting: fastest in round 1 (the one later rounds repeat)
first = {n: rs[0]["tokens_per_s"] for n, rs in runs.items() if rs[0]["round"] == 1}
best_tp = max((n for n in torchtp if n in first), key=lambda n: first[n], default=None)

def name(n):
    r = runs[n][0]
    if n == mt1_label:
        return "meshtrain 1 process x %s" % t
    if n == mttp_label:
        return "meshtrain tensor=%d, %d processes x %s" % (tp, tp, t)
    v = "PyTorch " + r["torch"].split("+")[0]
    if n.startswith("torchtp-"):
        return "%s TP gloo %dx%s, %s embedding/head, %s, AdamW %s" % (
            v, tp, t, "vocab-parallel (loss_parallel)" if r["vocab"] == "parallel" else "replicated",
            "torch.compile" + (" per block" if r.get("compiled") == "each block" else "") if r["mode"] == "compile"
            else "eager", "fused" if r["optim"] == "fused" else r["optim"] + (" (for-loop)" if r["optim"] == "auto" else ""))
    return "%s 1 process x %s (no TP), eager" % (v, t)

def mem(n):
    r = runs[n][0]
    if "peak_parameters_mb" in r:
        return r["peak_parameters_mb"] + r.get("peak_optimizer_state_mb", 0.0)
    if "param_mib_per_rank" in r:
        return r["param_mib_per_rank"][0] + r["optim_state_mib_per_rank"][0]
    return None

print("config %s%s, batch %s shared by the tensor-parallel ranks, %s thread(s) per process, %s" % (
    cfg, " with MODEL=\"%s\" (L d heads ctx batch)" % custom if custom else "", batch, t, precision))
print("| runner | tokens/s (median of rounds) | per round | GFLOP/s | rank 0 params+optimizer MiB | peak RSS MiB |")
print("|---|---|---|---|---|---|")
for n in runners:
    r = runs[n][0]
    rss = ("%.0f (largest rank)" % (int(r["peak_rss_kib"]) / 1024) if "peak_rss_kib" in r else
           "/".join("%.0f" % x for x in r["peak_rss_mib_per_rank"]) if "peak_rss_mib_per_rank" in r else "")
    m = mem(n)
    print("| %s%s | %.0f | %s | %.1f | %s | %s |" % (
        name(n), " **(best PyTorch TP)**" if n == best_tp else "", tps[n],
        " / ".join("%.0f" % x["tokens_per_s"] for x in runs[n]),
        statistics.median(x["gflops"] for x in runs[n]), "" if m is None else "%.1f" % m, rss))
print("(per round: a figure far below the others means other work ran during that run: rerun it)")
print()

def ratio(what, a, b, target=None, per_round=True):
    if a not in tps or b not in tps:
        print("%s: n/a (a run is missing or failed)" % what)
        return
    x = tps[a] / tps[b]
    tail = "" if target is None else " (target %.1fx: %s)" % (target, "met" if x >= target else "NOT met")
    rounds = ""
    if per_round:
        by_round = {r["round"]: r["tokens_per_s"] for r in runs[b]}
        each = ["%.2f" % (r["tokens_per_s"] / by_round[r["round"]]) for r in runs[a] if r["round"] in by_round]
        rounds = "; per round %s" % " / ".join(each) if len(each) > 1 else ""
    print("%s: %.2fx%s%s" % (what, x, tail, rounds))

ratio("meshtrain tensor=%d / meshtrain 1 process" % tp, mttp_label, mt1_label, 1.7)
if bf16_peak and mttp_label in runs:
    # the physical limit: model FLOPs per second against the bf16 GEMM rate of both cores
    for n in [mttp_label] + ([best_tp] if best_tp else []):
        g = statistics.median(x["gflops"] for x in runs[n])
        print("%s: %.0f model GFLOP/s = %.0f%% of the bf16 GEMM rate on 2 threads (%.0f GFLOP/s)" % (
            name(n), g, 100 * g / bf16_peak, bf16_peak))
if best_tp:
    ratio("meshtrain tensor=%d / PyTorch TP at its best setting (%s)" % (tp, name(best_tp).split(", ", 1)[1]),
          mttp_label, best_tp, 1.5)
else:
    print("meshtrain tensor=%d / PyTorch TP: n/a (no PyTorch TP run)" % tp)
m1, mt = (mem(mt1_label) if mt1_label in runs else None), (mem(mttp_label) if mttp_label in runs else None)
if m1 and mt is not None:
    r1, rt = runs[mt1_label][0], runs[mttp_label][0]
    share = mt / m1
    print("meshtrain tensor=%d rank 0 params+optimizer / 1 process: %.1f%% (target <= 55%%: %s; params %.2f / %.2f MiB, "
          "optimizer state %.2f / %.2f MiB)" % (tp, 100 * share, "met" if share <= 0.55 else "NOT met",
          rt["peak_parameters_mb"], r1["peak_parameters_mb"], rt.get("peak_optimizer_state_mb", 0),
          r1.get("peak_optimizer_state_mb", 0)))
else:
    print("meshtrain params+optimizer share: n/a (a run is missing or its metrics carry no peak_parameters_mb)")
if best_tp:
    r = runs[best_tp][0]
    print("PyTorch TP rank 0 params+AdamW / the whole model's: %.1f%%" % (100 * r["param_optim_share_rank0"]))
torch1 = next((n for n in runners if n.startswith("torch-1x")), None)
for n in ([best_tp] if best_tp else []):
    if torch1:
        ratio("PyTorch's own scaling: best TP %dx%s / PyTorch 1x%s" % (tp, t, t), n, torch1, per_round=False)
EOF
echo "raw results: ${results#$root/}"
