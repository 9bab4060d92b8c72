#!/usr/bin/env bash
# GPT training throughput: meshtrain against PyTorch on this machine, in one run.
#
# For config A (L=4, d=256, heads=4, ctx=128, batch 8) and config B (L=6,
# d=384, heads=6, ctx=256, batch 8), at $THREADS threads (default 2), runs
#   * PyTorch, current release (bench/.venv), eager
#   * PyTorch, current release, torch.compile
#   * PyTorch 1.13 from Debian (/usr/bin/python3), eager
#   * meshtrain (build/src/meshtrain/meshtrain train examples/gpt-bench-{a,b}.toml)
# and prints tokens/s (median over timed steps), GFLOP/s (FLOPs per token =
# 6*N + 12*L*d*ctx, N = 12*L*d^2 + (V+ctx)*d, V the vocabulary; see bench/peers/torch_gpt.py)
# and meshtrain's ratio to each peer. Results: bench/RESULTS.md, rows 1-2 (every run:
# bench/log/02-gpt-throughput-fp32.md). Set up the peers first with bench/setup-venv.sh.
#
# Environment knobs (defaults in brackets):
#   THREADS [2]  CONFIGS ["a b"] (gpt2: GPT-2 small's shape in bf16, the peers too; bench_config)  PEERS ["eager compile debian meshtrain"]
#   STEPS_A [30] STEPS_B [12] STEPS_GPT2 [4]  timed steps for each PyTorch run
#   WARMUP [3]   COMPILE_WARMUP [4]  untimed steps first (compile: includes compilation)
#   MT_STEPS_A [40] MT_STEPS_B [16] MT_STEPS_GPT2 [8]  meshtrain --training.steps
#   MT_SKIP [5]  meshtrain metric lines skipped before taking the median
#   IDLE_WAIT [120] IDLE_PCT [10]  before each run, wait up to IDLE_WAIT s for
#                the CPUs to be under IDLE_PCT % busy (other work skews figures)
#   TORCH_WAIT [unset] DEBIAN_WAIT [passive]  OMP_WAIT_POLICY for each PyTorch
#                (the best measured for each; see bench/log/02-gpt-throughput-fp32.md)
#   TORCH_ATTN [sdpa]  TORCH_OPTIM [auto]  VENV_PY [bench/.venv/bin/python]
#   DEBIAN_PY [/usr/bin/python3]  MESHTRAIN [build/src/meshtrain/meshtrain]
#   OUT [bench/out/gpt_throughput]  (raw JSON / JSONL, git-ignored)
# OPENBLAS_CORETYPE is left as the environment has it (and printed).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

THREADS="${THREADS:-2}"
CONFIGS="${CONFIGS:-a b}"
PEERS="${PEERS:-eager compile debian meshtrain}"
STEPS_A="${STEPS_A:-30}"
STEPS_B="${STEPS_B:-12}"
STEPS_GPT2="${STEPS_GPT2:-4}"
WARMUP="${WARMUP:-3}"
COMPILE_WARMUP="${COMPILE_WARMUP:-4}"
MT_STEPS_A="${MT_STEPS_A:-40}"
MT_STEPS_B="${MT_STEPS_B:-16}"
MT_STEPS_GPT2="${MT_STEPS_GPT2:-8}"
MT_SKIP="${MT_SKIP:-5}"
IDLE_WAIT="${IDLE_WAIT:-120}"
IDLE_PCT="${IDLE_PCT:-10}"
TORCH_WAIT="${TORCH_WAIT:-unset}"
DEBIAN_WAIT="${DEBIAN_WAIT:-passive}"
TORCH_ATTN="${TORCH_ATTN:-sdpa}"
TORCH_OPTIM="${TORCH_OPTIM:-auto}"
VENV_PY="${VENV_PY:-$root/bench/.venv/bin/python}"
DEBIAN_PY="${DEBIAN_PY:-/usr/bin/python3}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/gpt_throughput}"
PEER="$root/bench/peers/torch_gpt.py"
# A python for this script's own JSON handling (any python3 will do).
JPY="$(command -v python3 || echo "$DEBIAN_PY")"

BENCH_PY="$JPY"
source bench/bench_lib.sh  # the script runs from the repository root
bench_results

# Same thread-pool bounds for every runner, meshtrain included.
bench_threads "$THREADS"

echo "gpt_throughput: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, threads=$THREADS," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset: OpenBLAS picks its kernels itself>}"

cfg_dims() {  # layers d heads ctx batch vocabulary precision (bench_config)
  bench_config "$1" >&2 && echo "$L $D $H $C $B $V $PREC"
}

run_torch() {  # config runner python mode wait attn steps warmup
  local cfg="$1" runner="$2" py="$3" mode="$4" wait="$5" attn="$6" steps="$7" warm="$8"
  read -r L D H C B V PREC < <(cfg_dims "$cfg")
  bench_need "$runner" "$py" "run bench/setup-venv.sh" || return
  local optim=""  # PyTorch 1.13's peer keeps its default optimizer
  [ "$runner" != "torch-1.13-eager" ] && optim="$TORCH_OPTIM"
  local model
  mapfile -t model < <(bench_peer_model "$L" "$D" "$H" "$C" "$B" "$THREADS" "$wait" "$attn" "$optim"
                       printf '%s\n' --vocab-size "$V" --precision "$PREC")
  if bench_run_peer "$runner" "$OUT/$cfg-$runner" "$py" "$PEER" "${model[@]}" --steps "$steps" --warmup "$warm" \
       --mode "$mode" --json; then
    echo "$peer_line" > "$OUT/$cfg-$runner.json"
    bench_record "$peer_line" "config=$cfg" "runner=$runner"
    "$JPY" -c 'import json,sys; r=json.loads(sys.argv[1]); print("    torch %s: %.0f tokens/s, %.1f GFLOP/s (warmup %.1f s)" % (r["torch"], r["tokens_per_s"], r["gflops"], r["warmup_s"]))' "$peer_line"
  else
    bench_failed "$OUT/$cfg-$runner.err"
  fi
}

run_meshtrain() {  # config steps
  local cfg="$1" steps="$2"
  local toml="examples/gpt-bench-$cfg.toml"
  bench_need meshtrain "$MESHTRAIN" "MESHTRAIN=..." || return
  if [ ! -f "$toml" ]; then
    echo "  meshtrain: SKIPPED: $toml not found"; return
  fi
  read -r L D H C B V PREC < <(cfg_dims "$cfg")
  local metrics="$OUT/$cfg-meshtrain.jsonl"
  rm -f "$metrics"
  bench_run meshtrain "$OUT/$cfg-meshtrain.log" "$MESHTRAIN" train "$toml" "--training.steps=$steps" \
    "--training.threads=$THREADS" "--metrics.path=$metrics" || return
  local line
  line="$(bench_mt_metrics "$metrics" "$MT_SKIP" "$L" "$D" "$C" "vocab=$V" peer=meshtrain)" || { echo "    FAILED to read $metrics"; return; }
  bench_record "$line" "config=$cfg" runner=meshtrain
  "$JPY" -c 'import json,sys; r=json.loads(sys.argv[1]); print("    %.0f tokens/s, %.1f GFLOP/s over %d steps" % (r["tokens_per_s"], r["gflops"], r["steps_timed"]))' "$line"
}

for cfg in $CONFIGS; do
  read -r L D H C B V PREC < <(cfg_dims "$cfg") || exit 1
  up="$(echo "$cfg" | tr a-z A-Z)"
  steps_var="STEPS_$up"; mt_var="MT_STEPS_$up"
  echo "config $up: L=$L d=$D heads=$H ctx=$C batch=$B"
  for p in $PEERS; do
    case "$p" in
      eager)     run_torch "$cfg" torch-eager "$VENV_PY" eager "$TORCH_WAIT" "$TORCH_ATTN" "${!steps_var}" "$WARMUP" ;;
      compile)   run_torch "$cfg" torch-compile "$VENV_PY" compile "$TORCH_WAIT" "$TORCH_ATTN" "${!steps_var}" "$COMPILE_WARMUP" ;;
      debian)    run_torch "$cfg" torch-1.13-eager "$DEBIAN_PY" eager "$DEBIAN_WAIT" manual "${!steps_var}" "$WARMUP" ;;
      meshtrain) run_meshtrain "$cfg" "${!mt_var}" ;;
      *) echo "unknown peer $p (eager compile debian meshtrain)"; exit 2 ;;
    esac
  done
done

echo
"$JPY" - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
names = {"torch-eager": "PyTorch %s eager", "torch-compile": "PyTorch %s torch.compile",
         "torch-1.13-eager": "PyTorch %s eager (Debian)", "meshtrain": "meshtrain"}
print("| config | runner | tokens/s | GFLOP/s | meshtrain / runner |")
print("|---|---|---|---|---|")
for cfg in dict.fromkeys(r["config"] for r in rows):
    rs = [r for r in rows if r["config"] == cfg]
    mt = next((r for r in rs if r["runner"] == "meshtrain"), None)
    for r in rs:
        name = names.get(r["runner"], r["runner"])
        if "%s" in name:
            name = name % r.get("torch", "?").split("+")[0]
        ratio = "—" if mt is None or r is mt else "%.2f×" % (mt["tokens_per_s"] / r["tokens_per_s"])
        print("| %s | %s | %.0f | %.1f | %s |" % (cfg.upper(), name, r["tokens_per_s"], r["gflops"], ratio))
    if mt is None:
        print("| %s | meshtrain | not run | | |" % cfg.upper())
EOF
echo "raw results: ${results#$root/}"
