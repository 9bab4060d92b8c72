#!/usr/bin/env bash
# bf16 mixed precision on this machine: meshtrain's training.precision = bf16 against PyTorch's own bf16
# settings, in alternating runs.
#
# Part "single" (for each config of $CONFIGS: A = examples/gpt-bench-a.toml, GPT L=4 d=256 h=4 ctx=128;
# B = examples/gpt-bench-b.toml, L=6 d=384 h=6 ctx=256; batch 8), 1 process x $THREADS threads; each
# round runs
#   * mt-fp32       meshtrain train examples/gpt-bench-X.toml --training.steps=40 --training.threads=2
#                     --metrics.path=... --training.out_dir=... --training.precision=fp32 (bench/gpt_throughput.sh's
#                     command, with the threads, an out_dir under $OUT and the precision)
#   * mt-bf16       the same with --training.precision=bf16
#   * eager-bf16    PyTorch (bench/.venv) bench/peers/torch_gpt.py --mode eager --precision bf16: forward and
#                     loss under torch.autocast("cpu", dtype=torch.bfloat16), fp32 weights and AdamW state
#   * compile-bf16  the same with --mode compile (torch.compile; compilation in the untimed warm-up steps)
#   (optional, through SINGLE_RUNNERS: eager-fp32, compile-fp32, PyTorch's own fp32 for reference)
# and prints tokens/s (median over the timed steps) and, taken within each round, then the median of the
# rounds,
#   meshtrain bf16 / PyTorch eager bf16 and / PyTorch torch.compile bf16   (target >= 2x on B, >= 1.5x on A)
#   meshtrain bf16 / meshtrain fp32
# and meshtrain bf16's GFLOP/s (FLOPs per token = 6*N + 12*L*d*ctx, N = 12*L*d^2 + (256+ctx)*d, as
# bench/gpt_throughput.sh) and, with PEAK_GFLOPS set, its share of that peak.
#
# Parts "dp" and "zero3" (config $DP_CONFIG, default B), 2 processes x $DP_THREADS thread(s), per-worker
# batch 8; each round runs
#   dp:    * mt-bf16   meshtrain launch --nproc 2 --transport shm -- meshtrain train examples/gpt-bench-b.toml
#                        --training.steps=16 --training.threads=1 --training.log_every=1 --parallel.data=allreduce
#                        --parallel.transport=shm --parallel.bucket_mb=25 --parallel.all_reduce=auto
#                        --training.precision=bf16   (the command of bench/data_parallel.sh and bench/zero.sh)
#          * ddp-bf16  bench/peers/torch_ddp_gpt.py --nproc 2 --precision bf16 (DDP's defaults, gloo, autocast
#                        as above, fp32 gradients all-reduced; $DDP_ARGS adds settings)
#   zero3: * mt-bf16   the dp command plus --parallel.zero_stage=3
#          * fsdp-bf16 bench/peers/torch_zero_gpt.py --mode fsdp --precision bf16: FSDP2 fully_shard per block
#                        and on the root with MixedPrecisionPolicy(param_dtype=torch.bfloat16,
#                        reduce_dtype=torch.bfloat16) (exit status 3, reported, if FSDP cannot run here)
#   (optional, through DP_RUNNERS / ZERO3_RUNNERS: mt-fp32, ddp-fp32 / fsdp-fp32, and fsdp-bf16-autocast:
#    the policy plus torch.autocast around forward and loss)
# and prints global tokens/s and, within each round, meshtrain dp bf16 / DDP bf16 and meshtrain ZeRO-3 bf16 /
# FSDP bf16 (target >= 1.5x each).
#
# Runtime with the defaults: ~8-10 min (estimate per round from smoke tests: single A ~1 min (2 meshtrain
# runs of ~10 s, eager ~10 s, torch.compile ~30 s of which ~22 s compiling), single B ~1.5 min (meshtrain
# ~15 s each, eager ~15 s, torch.compile ~45 s of which ~30 s compiling), dp ~45 s, zero3 ~45 s; the second
# round compiles faster from Inductor's cache), plus the waits for idle CPUs.
#
# Knobs (defaults in brackets):
#   ROUNDS [2]  PARTS ["single dp zero3"]  CONFIGS ["a b"] (single)  DP_CONFIG [b] (dp, zero3); any of a b gpt2
#   THREADS [2] threads of the single-process runs   DP_THREADS [1] threads per process in dp, zero3
#   SINGLE_RUNNERS ["mt-fp32 mt-bf16 eager-bf16 compile-bf16"] (also: eager-fp32 compile-fp32)
#   DP_RUNNERS ["mt-bf16 ddp-bf16"] (also: mt-fp32 ddp-fp32)
#   ZERO3_RUNNERS ["mt-bf16 fsdp-bf16"] (also: mt-fp32 fsdp-fp32 fsdp-bf16-autocast)
#   STEPS_A [30] STEPS_B [12]  timed steps of each single-process PyTorch run
#   MT_STEPS_A [40] MT_STEPS_B [16]  meshtrain --training.steps, single process
#   WARMUP [3]  COMPILE_WARMUP [4]  untimed PyTorch steps first (compile: includes compilation)
#   DP_STEPS [12] timed PyTorch steps (dp, zero3)   DP_MT_STEPS [16] meshtrain --training.steps (dp, zero3)
#   MT_SKIP [5] meshtrain metric lines skipped before taking the median
#   MT_TRANSPORT [shm]  MT_BUCKET_MB [25]  MT_ALGO [auto] --parallel.all_reduce   DDP_ARGS [""]
#   MT_REDUCE_DTYPE [unset] adds --parallel.reduce_dtype=VALUE to the dp and zero3 meshtrain runs (bf16:
#       gradients reduced and ZeRO-3's parameters gathered in bf16, the counterpart of FSDP's
#       reduce_dtype/param_dtype; unset: meshtrain's default, fp32 communication)
#   TORCH_WAIT [unset] OMP_WAIT_POLICY for PyTorch   TORCH_ATTN [sdpa]   TORCH_OPTIM [auto]
#   PEAK_GFLOPS [unset] bf16 peak GFLOP/s of the $THREADS cores the single-process runs use (e.g. the
#       "bf16 peak (gemm_bf16, square 2048)" that build/bench/bench_gemm prints for 2 threads)
#   VENV_PY [bench/.venv/bin/python]  MESHTRAIN [build/src/meshtrain/meshtrain]  OUT [bench/out/mixed_precision]
#   IDLE_WAIT [120] IDLE_PCT [10]  before each run, wait up to IDLE_WAIT s for the CPUs to be under
#       IDLE_PCT % busy (other work skews figures)
# Smoke test (a few steps, one round):
#   ROUNDS=1 STEPS_A=2 STEPS_B=2 MT_STEPS_A=4 MT_STEPS_B=4 MT_SKIP=1 WARMUP=1 COMPILE_WARMUP=1 DP_STEPS=2 \
#     DP_MT_STEPS=4 bench/mixed_precision.sh
# OPENBLAS_CORETYPE is left as the environment has it (and printed). The meshtrain runs need a build with
# training.precision; an older one fails them with "unknown key", reported, and the PyTorch runs still run.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

ROUNDS="${ROUNDS:-2}"
PARTS="${PARTS:-single dp zero3}"
CONFIGS="${CONFIGS:-a b}"
DP_CONFIG="${DP_CONFIG:-b}"
THREADS="${THREADS:-2}"
DP_THREADS="${DP_THREADS:-1}"
SINGLE_RUNNERS="${SINGLE_RUNNERS:-mt-fp32 mt-bf16 eager-bf16 compile-bf16}"
DP_RUNNERS="${DP_RUNNERS:-mt-bf16 ddp-bf16}"
ZERO3_RUNNERS="${ZERO3_RUNNERS:-mt-bf16 fsdp-bf16}"
STEPS_A="${STEPS_A:-30}"
STEPS_B="${STEPS_B:-12}"
MT_STEPS_A="${MT_STEPS_A:-40}"
MT_STEPS_B="${MT_STEPS_B:-16}"
WARMUP="${WARMUP:-3}"
COMPILE_WARMUP="${COMPILE_WARMUP:-4}"
DP_STEPS="${DP_STEPS:-12}"
DP_MT_STEPS="${DP_MT_STEPS:-16}"
MT_SKIP="${MT_SKIP:-5}"
MT_TRANSPORT="${MT_TRANSPORT:-shm}"
MT_BUCKET_MB="${MT_BUCKET_MB:-25}"
MT_ALGO="${MT_ALGO:-auto}"
MT_REDUCE_DTYPE="${MT_REDUCE_DTYPE:-}"
DDP_ARGS="${DDP_ARGS:-}"
TORCH_WAIT="${TORCH_WAIT:-unset}"
TORCH_ATTN="${TORCH_ATTN:-sdpa}"
TORCH_OPTIM="${TORCH_OPTIM:-auto}"
PEAK_GFLOPS="${PEAK_GFLOPS:-}"
VENV_PY="${VENV_PY:-$root/bench/.venv/bin/python}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/mixed_precision}"
IDLE_WAIT="${IDLE_WAIT:-120}"
IDLE_PCT="${IDLE_PCT:-10}"

source bench/bench_lib.sh  # the script runs from the repository root
bench_results

cfg_dims() {  # config -> layers d heads ctx batch vocabulary (bench_config; gpt2: GPT-2 small's shape)
  bench_config "$1" >&2 && echo "$L $D $H $C $B $V"
}
for cfg in $CONFIGS $DP_CONFIG; do cfg_dims "$cfg" > /dev/null || exit 2; done

cpu_model="$(bench_cpu_model)"
cpu_flags="$(bench_cpu_flags avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16 amx_int8)"
bf16_flags=""
for f in avx512_bf16 amx_tile amx_bf16; do
  if grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -qx "$f"; then bf16_flags+=" $f=yes"; else bf16_flags+=" $f=no"; fi
done
torch_version="$(bench_torch_version "$VENV_PY" "not found")"
echo "mixed_precision: $(date -u +%Y-%m-%dT%H:%M:%SZ), parts: $PARTS, $ROUNDS round(s)," \
     "$(getconf _NPROCESSORS_ONLN) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU: $cpu_model; flags: ${cpu_flags:-none of avx2/avx512/amx}; bf16:$bf16_flags;" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset: OpenBLAS picks its kernels itself>}; PyTorch (bench/.venv): $torch_version"

# run_meshtrain PART CONFIG RUNNER ROUND NPROC THREADS STEPS PRECISION [extra meshtrain flags...]
run_meshtrain() {
  local part="$1" cfg="$2" runner="$3" round="$4" nproc="$5" threads="$6" steps="$7" prec="$8"
  shift 8
  local label="$part-$cfg-$runner"
  bench_need "$label" "$MESHTRAIN" "MESHTRAIN=..." || return
  local toml="examples/gpt-bench-$cfg.toml"
  [ -f "$toml" ] || { echo "  $label: SKIPPED: $toml not found"; return; }
  local L D H C B V
  read -r L D H C B V < <(cfg_dims "$cfg")
  local dir="$OUT/$label-r$round"; rm -rf "$dir"; mkdir -p "$dir"
  local train=("$MESHTRAIN" train "$toml" "--training.steps=$steps" "--training.threads=$threads"
               "--metrics.path=$dir/metrics.jsonl" "--training.out_dir=$dir/run")
  if [ "$nproc" -gt 1 ]; then
    local dp
    mapfile -t dp < <(bench_mt_dp_flags "$MT_TRANSPORT" "$MT_BUCKET_MB" "$MT_ALGO")
    train+=("--training.log_every=1" "${dp[@]}")
  fi
  bench_mt_cmd "$nproc" "$MT_TRANSPORT" "${train[@]}" "$@" "--training.precision=$prec"
  # the same thread-pool bounds as the PyTorch peers set for themselves
  if ! OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads" \
       bench_run "$label" "$dir/log" "${mt_cmd[@]}"; then
    if grep -q 'training.precision: unknown key' "$dir/log"; then
      echo "    (this meshtrain build has no training.precision yet: rebuild it, then rerun with PARTS/…_RUNNERS as needed)"
    fi
    return
  fi
  local line how
  how="$(grep -m1 -E '^(\[rank 0\] )?precision:' "$dir/log" | sed -E 's/^(\[rank 0\] )?precision: *//')"  # the setup line
  local kv=("peer=meshtrain" "precision=$prec" "nproc=$nproc" "threads=$threads")
  [ -n "$how" ] && kv+=("precision_log=$how")
  [ "$nproc" -gt 1 ] && [ -n "$MT_REDUCE_DTYPE" ] && kv+=("reduce_dtype=$MT_REDUCE_DTYPE")
  line="$(bench_mt_metrics "$dir/metrics.jsonl" "$MT_SKIP" "$L" "$D" "$C" "vocab=$V" "${kv[@]}")" || { echo "    no metrics"; return; }
  bench_record "$line" "part=$part" "config=$cfg" "runner=$runner" "round:=$round"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])
print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms over %d steps, loss %s  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms"], r["steps_timed"], "%.3f" % r["loss_last"] if r.get("loss_last") is not None else "?", sys.argv[2]))' \
    "$line" "$(bench_elapsed)"
  [ "$round" = 1 ] && [ -n "$how" ] && echo "    meshtrain: $how"
}

# run_torch PART CONFIG RUNNER ROUND PEER ARGS...: the peer bench/peers/PEER under $VENV_PY
run_torch() {
  local part="$1" cfg="$2" runner="$3" round="$4"
  shift 4
  local label="$part-$cfg-$runner"
  bench_need "$label" "$VENV_PY" "run bench/setup-venv.sh" || return
  local out="$OUT/$label-r$round"
  if bench_run_peer "$label" "$out" "$VENV_PY" "$@"; then
    bench_record "$peer_line" "part=$part" "config=$cfg" "runner=$runner" "round:=$round"
    python3 -c 'import json,sys; r=json.loads(sys.argv[1])
how = r.get("bf16") or r.get("precision", "?")
if r.get("fsdp_api"):
    how = "%s, %s" % (r["fsdp_api"], how)
print("    %.0f tokens/s, %.1f GFLOP/s, step %.0f ms (first step %.1f s, warm-up %.1f s), loss %.3f -> %.3f, %s  [%s s]" % (r["tokens_per_s"], r["gflops"], r["step_ms_median"], r["first_step_s"] or 0, r["warmup_s"], r["loss_first"], r["loss_last"], how, sys.argv[2]))' \
      "$peer_line" "$(bench_elapsed)"
  elif [ "$peer_rc" = 3 ]; then  # torch_zero_gpt.py's "cannot run here" status (FSDP on CPU/gloo)
    echo "    CANNOT RUN: $(grep -v '^{' "$out.out" | tail -n 1)"
  else
    bench_failed "$out.err" 5 "(status $peer_rc)"
  fi
}

torch_model() {  # config threads -> the model and thread arguments of the PyTorch peers, one a line
  local L D H C B V
  read -r L D H C B V < <(cfg_dims "$1")
  bench_peer_model "$L" "$D" "$H" "$C" "$B" "$2" "$TORCH_WAIT" "$TORCH_ATTN" "$TORCH_OPTIM"
  printf '%s\n' --vocab-size "$V"
}

run_single() {  # round config runner
  local round="$1" cfg="$2" runner="$3" up steps mt_steps
  up="$(echo "$cfg" | tr a-z A-Z)"
  steps="STEPS_$up"; mt_steps="MT_STEPS_$up"
  local model
  mapfile -t model < <(torch_model "$cfg" "$THREADS")
  case "$runner" in
    mt-fp32|mt-bf16)
      run_meshtrain single "$cfg" "$runner" "$round" 1 "$THREADS" "${!mt_steps}" "${runner#mt-}" ;;
    eager-bf16|eager-fp32|compile-bf16|compile-fp32)
      local mode="${runner%-*}" prec="${runner#*-}" warm="$WARMUP"
      [ "$mode" = compile ] && warm="$COMPILE_WARMUP"
      run_torch single "$cfg" "$runner" "$round" torch_gpt.py "${model[@]}" \
        --steps "${!steps}" --warmup "$warm" --mode "$mode" --precision "$prec" --json ;;
    *) echo "unknown single runner $runner (mt-fp32 mt-bf16 eager-bf16 compile-bf16 eager-fp32 compile-fp32)"; exit 2 ;;
  esac
}

run_dp() {  # round part runner
  local round="$1" part="$2" runner="$3" cfg="$DP_CONFIG"
  local model zero=()
  mapfile -t model < <(torch_model "$cfg" "$DP_THREADS")
  [ "$part" = zero3 ] && zero=(--parallel.zero_stage=3)
  [ -n "$MT_REDUCE_DTYPE" ] && zero+=("--parallel.reduce_dtype=$MT_REDUCE_DTYPE")
  case "$part:$runner" in
    dp:mt-bf16|dp:mt-fp32|zero3:mt-bf16|zero3:mt-fp32)
      run_meshtrain "$part" "$cfg" "$runner" "$round" 2 "$DP_THREADS" "$DP_MT_STEPS" "${runner#mt-}" "${zero[@]}" ;;
    dp:ddp-bf16|dp:ddp-fp32)
      # shellcheck disable=SC2086  # DDP_ARGS is a list of flags
      run_torch "$part" "$cfg" "$runner" "$round" torch_ddp_gpt.py --nproc 2 "${model[@]}" \
        --steps "$DP_STEPS" --warmup "$WARMUP" --precision "${runner#ddp-}" $DDP_ARGS --json ;;
    zero3:fsdp-bf16|zero3:fsdp-fp32|zero3:fsdp-bf16-autocast)
      local extra=() prec=bf16
      [ "$runner" = fsdp-fp32 ] && prec=fp32
      [ "$runner" = fsdp-bf16-autocast ] && extra=(--fsdp-autocast)
      run_torch "$part" "$cfg" "$runner" "$round" torch_zero_gpt.py --mode fsdp --nproc 2 \
        "${model[@]}" --steps "$DP_STEPS" --warmup "$WARMUP" --precision "$prec" "${extra[@]}" --json ;;
    *) echo "unknown $part runner $runner"; exit 2 ;;
  esac
}

for round in $(seq 1 "$ROUNDS"); do
  echo "round $round"
  for part in $PARTS; do
    case "$part" in
      single)
        for cfg in $CONFIGS; do
          for r in $SINGLE_RUNNERS; do run_single "$round" "$cfg" "$r"; done
        done ;;
      dp)    for r in $DP_RUNNERS; do run_dp "$round" dp "$r"; done ;;
      zero3) for r in $ZERO3_RUNNERS; do run_dp "$round" zero3 "$r"; done ;;
      *) echo "unknown part $part (single dp zero3)"; exit 2 ;;
    esac
  done
done

echo
python3 - "$results" "$THREADS" "$DP_THREADS" "$PEAK_GFLOPS" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
threads, dp_threads, peak = sys.argv[2], sys.argv[3], float(sys.argv[4]) if sys.argv[4] else None
groups = {}  # (part, config) -> runner -> {round: row}
for r in rows:
    groups.setdefault((r["part"], r["config"]), {}).setdefault(r["runner"], {})[r["round"]] = r
torch_v = next(("PyTorch " + r["torch"].split("+")[0] for r in rows if "torch" in r), "PyTorch")

def name(part, runner, rs):
    r = next(iter(rs.values()))
    if runner.startswith("mt-"):
        what = {"single": "1 process x %s" % threads, "dp": "data parallel 2x%s, shm" % dp_threads,
                "zero3": "ZeRO-3 2x%s, shm" % dp_threads}[part]
        rd = ", reduce_dtype " + r["reduce_dtype"] if r.get("reduce_dtype") else ""
        return "meshtrain %s, %s%s" % (runner[3:], what, rd)
    mode, prec = runner.split("-", 1)
    how = {"eager": "eager", "compile": "torch.compile", "ddp": "DDP gloo 2x%s" % dp_threads,
           "fsdp": "FSDP (%s) gloo 2x%s" % (r.get("fsdp_api") or "?", dp_threads)}[mode]
    bf16 = r.get("bf16")
    return "%s %s, %s" % (torch_v, how, "bf16 " + bf16 if bf16 else r.get("precision", prec))

def ratio(what, runs, a, b, target=None):
    """a / b within each round, and their median; a and b are runner names in runs."""
    if a not in runs or b not in runs:
        print("%s: n/a (a run is missing or failed)" % what)
        return
    each = [runs[a][k]["tokens_per_s"] / runs[b][k]["tokens_per_s"] for k in sorted(runs[a]) if k in runs[b]]
    if not each:
        print("%s: n/a (no round has both runs)" % what)
        return
    x = statistics.median(each)
    tail = "" if target is None else " (target %.1fx: %s)" % (target, "met" if x >= target else "NOT met")
    per = "; per round %s" % " / ".join("%.2f" % e for e in each) if len(each) > 1 else ""
    print("%s: %.2fx%s%s" % (what, x, tail, per))

order = {"single": 0, "dp": 1, "zero3": 2}
for part, cfg in sorted(groups, key=lambda k: (order.get(k[0], 9), k[1])):
    runs = groups[(part, cfg)]
    title = {"single": "single process", "dp": "data parallel", "zero3": "ZeRO-3 / FSDP"}.get(part, part)
    print("%s, config %s, batch 8%s" % (title, cfg.upper(), "" if part == "single" else " per worker"))
    print("| runner | tokens/s (median of rounds) | per round | GFLOP/s | loss last |")
    print("|---|---|---|---|---|")
    for runner, rs in runs.items():
        tps = statistics.median(x["tokens_per_s"] for x in rs.values())
        last = rs[max(rs)].get("loss_last")
        print("| %s | %.0f | %s | %.1f | %s |" % (
            name(part, runner, rs), tps, " / ".join("%.0f" % rs[k]["tokens_per_s"] for k in sorted(rs)),
            statistics.median(x["gflops"] for x in rs.values()), "" if last is None else "%.3f" % last))
    if part == "single":
        target = {"a": 1.5, "b": 2.0}.get(cfg)
        ratio("meshtrain bf16 / PyTorch eager bf16 (autocast)", runs, "mt-bf16", "eager-bf16", target)
        ratio("meshtrain bf16 / PyTorch torch.compile bf16 (autocast)", runs, "mt-bf16", "compile-bf16", target)
        ratio("meshtrain bf16 / meshtrain fp32", runs, "mt-bf16", "mt-fp32")
        for p in ("eager", "compile"):
            if p + "-fp32" in runs:
                ratio("PyTorch %s bf16 / fp32" % p, runs, p + "-bf16", p + "-fp32")
        if "mt-bf16" in runs:
            g = statistics.median(x["gflops"] for x in runs["mt-bf16"].values())
            share = " = %.0f%% of PEAK_GFLOPS %.0f" % (100 * g / peak, peak) if peak else " (PEAK_GFLOPS unset)"
            print("meshtrain bf16 achieved %.1f GFLOP/s at %s threads%s" % (g, threads, share))
            how = next((x.get("precision_log") for x in runs["mt-bf16"].values() if x.get("precision_log")), None)
            if how:
                print("meshtrain bf16: %s" % how)
    elif part == "dp":
        ratio("meshtrain data parallel bf16 / PyTorch DDP bf16 (autocast)", runs, "mt-bf16", "ddp-bf16", 1.5)
        if "mt-fp32" in runs:
            ratio("meshtrain data parallel bf16 / fp32", runs, "mt-bf16", "mt-fp32")
        if "ddp-fp32" in runs:
            ratio("PyTorch DDP bf16 / fp32", runs, "ddp-bf16", "ddp-fp32")
    elif part == "zero3":
        fsdp = next((x for x in runs.get("fsdp-bf16", {}).values()), None)
        ratio("meshtrain ZeRO-3 bf16 / PyTorch FSDP bf16 (%s)" % (fsdp.get("bf16") if fsdp else "?"),
              runs, "mt-bf16", "fsdp-bf16", 1.5)
        if "fsdp-bf16-autocast" in runs:
            ratio("PyTorch FSDP bf16 policy + autocast / policy alone", runs, "fsdp-bf16-autocast", "fsdp-bf16")
        if "mt-fp32" in runs:
            ratio("meshtrain ZeRO-3 bf16 / fp32", runs, "mt-bf16", "mt-fp32")
        if "fsdp-fp32" in runs:
            ratio("PyTorch FSDP bf16 / fp32", runs, "fsdp-bf16", "fsdp-fp32")
    print()
if not rows:
    print("no run succeeded")
EOF
echo "raw results: ${results#"$root"/}"
