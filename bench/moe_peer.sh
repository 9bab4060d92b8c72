#!/usr/bin/env bash
# Expert parallelism against PyTorch's on the same model: the MoE GPT of bench/moe_parallel.sh (config B's
# shape, L=6 d=384 ctx=256, every block's MLP 4 experts, top-2, dropless, the balancing loss on) on
# 2 processes x 1 thread with the experts split over both (expert parallelism 2), global batch 8:
#   meshtrain launch --nproc 2 --transport shm -- meshtrain train examples/gpt-bench-b.toml \
#     --parallel.data=allreduce --parallel.expert=2 --training.batch_size=4 --model.n_expert=4 --model.top_k=2
#   python bench/peers/torch_moe_gpt.py --nproc 2 --threads 1 --batch 4 --experts 4 --top-k 2 --ep 2 \
#     --dispatch torchtitan | plain | deepspeed          (gloo, 2 processes x 1 thread)
# torchtitan: torchtitan 0.3's AllToAllTokenDispatcher for the dispatch and combine; plain: the same
# steps over dist.all_to_all_single written in the peer; deepspeed: DeepSpeed 0.19's deepspeed.moe
# layer (bench/peers/torch_moe_gpt.py says what each is). A dispatcher whose package the peer's Python
# cannot import is skipped with a message. The runs alternate within each round (ROUNDS rounds) and the
# ratios meshtrain / peer are taken within each round; tokens/s = the median over the timed steps
# (meshtrain: the lead's metrics after MT_SKIP steps; the peer: after its warmup steps).
#
# The peer's Python: PEER_PYTHON, default $MESHTRAIN_BENCH_VENV/bin/python (bench/.venv, made by
# bench/setup-venv.sh). torchtitan and DeepSpeed are not in it; the results in bench/RESULTS.md used a
# venv on top of it:
#   bench/.venv/bin/python -m venv --system-site-packages /work/moe-peer-venv
#   echo "$PWD/bench/.venv/lib/python3.11/site-packages" > /work/moe-peer-venv/lib/python3.11/site-packages/bench-venv.pth
#   /work/moe-peer-venv/bin/pip install torchtitan==0.3.0 deepspeed==0.19.8
#   PEER_PYTHON=/work/moe-peer-venv/bin/python bench/moe_peer.sh
#
# The defaults time steps 37-60 on both sides, once each framework's balancing loss has evened its
# routing out (bench/moe_parallel.sh); MT_STEPS=8 MT_SKIP=2 PEER_STEPS=6 PEER_WARMUP=2 times the routing at
# initialisation instead.
#
# PRECISION=bf16: meshtrain with --training.precision=bf16 (router included), the peer with --precision bf16
# (forward and loss under torch.autocast); the machine's bf16 GEMM rate (bench_gemm --bf16-peak) is
# measured first and meshtrain's model GFLOP/s (top-k experts' FLOPs per token) reported as a share of it.
#
# Knobs: PRECISION [fp32]  ROUNDS [3]  MT_STEPS [60]  MT_SKIP [36]  PEER_STEPS [24]  PEER_WARMUP [36]  DISPATCH ["torchtitan
#   plain deepspeed"]  EXPERTS [4]  TOP_K [2]  MESHTRAIN [build/src/meshtrain/meshtrain]
#   OUT [bench/out/moe_peer]  IDLE_WAIT [60] IDLE_PCT [15]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
ROUNDS="${ROUNDS:-3}"
PRECISION="${PRECISION:-fp32}"
MT_STEPS="${MT_STEPS:-60}"
MT_SKIP="${MT_SKIP:-36}"
PEER_STEPS="${PEER_STEPS:-24}"
PEER_WARMUP="${PEER_WARMUP:-36}"
DISPATCH="${DISPATCH:-torchtitan plain deepspeed}"
EXPERTS="${EXPERTS:-4}"
TOP_K="${TOP_K:-2}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
PEER_PYTHON="${PEER_PYTHON:-${MESHTRAIN_BENCH_VENV:-$root/bench/.venv}/bin/python}"
OUT="${OUT:-$root/bench/out/moe_peer}"
IDLE_WAIT="${IDLE_WAIT:-60}"
IDLE_PCT="${IDLE_PCT:-15}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT"
source bench/bench_lib.sh
[ -x "$PEER_PYTHON" ] || { echo "moe_peer: no Python at $PEER_PYTHON (run bench/setup-venv.sh, or set PEER_PYTHON)" >&2; exit 1; }
data="$root/data/kjv.txt"
[ -s "$data" ] || { echo "moe_peer: prepare data/kjv.txt first (scripts/quickstart.sh)" >&2; exit 1; }

cpu_flags="$(bench_cpu_flags avx2 fma avx512f avx512_bf16 amx_bf16)"
echo "moe_peer: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(getconf _NPROCESSORS_ONLN) CPUs," \
     "CPU: $(bench_cpu_model); flags: ${cpu_flags:-none};" \
     "load $(cut -d' ' -f1-3 /proc/loadavg); torch $(bench_torch_version "$PEER_PYTHON"); precision $PRECISION"
bf16_peak_2=""
[ "$PRECISION" = bf16 ] && bench_bf16_peak "$OUT/gemm.txt"

# Which dispatchers the peer's Python can run.
peers=()
for d in $DISPATCH; do
  case "$d" in
    torchtitan) mod=torchtitan.models.common.token_dispatcher ;;
    deepspeed) mod=deepspeed.moe.layer ;;
    *) mod=torch ;;
  esac
  if DS_ACCELERATOR=cpu "$PEER_PYTHON" -c "import $mod" > /dev/null 2>&1; then
    peers+=("$d")
  else
    echo "  skipped: --dispatch $d ($mod is not importable by $PEER_PYTHON)"
  fi
done

# run_meshtrain DIR: prints the median tokens/s after MT_SKIP steps and the routing imbalance over the
# 2 expert ranks (the busier rank's expert rows over an even share, mean over layers and those steps).
run_meshtrain() {
  local dir="$1"
  rm -rf "$dir"; mkdir -p "$dir"
  bench_mt_cmd 2 shm "$MESHTRAIN" train examples/gpt-bench-b.toml \
    --training.threads=1 --training.steps="$MT_STEPS" --training.log_every=1 --training.eval_every=0 \
    --checkpoint.every=0 --data.path="$data" --model.n_expert="$EXPERTS" --model.top_k="$TOP_K" \
    --parallel.data=allreduce --parallel.expert=2 --training.batch_size=4 --training.precision="$PRECISION" \
    --training.out_dir="$dir/run" --metrics.path="$dir/metrics.jsonl"
  wait_idle >&2
  "${mt_cmd[@]}" > "$dir/log" 2>&1 ||
    { echo "FAILED: ${dir#$root/}/log" >&2; echo 0 0; return; }
  python3 -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"tokens_per_s\"" in l][int(sys.argv[2]):]
imbalance = [max(sum(l["load"][:len(l["load"]) // 2]), sum(l["load"][len(l["load"]) // 2:])) / (sum(l["load"]) / 2)
             for r in rows for l in r["moe"]]
print(statistics.median(r["tokens_per_s"] for r in rows), round(statistics.mean(imbalance), 3))' "$dir/metrics.jsonl" "$MT_SKIP"
}

# peer DIR DISPATCH: prints the peer's median tokens/s and its routing imbalance.
peer() {
  local dir="$1" dispatch="$2"
  rm -rf "$dir"; mkdir -p "$dir"
  bench_peer_cmd "$PEER_PYTHON" torch_moe_gpt.py --nproc 2 --threads 1 --batch 4 \
    --layers 6 --d 384 --heads 6 --ctx 256 --experts "$EXPERTS" --top-k "$TOP_K" --ep 2 --dispatch "$dispatch" \
    --precision "$PRECISION" --steps "$PEER_STEPS" --warmup "$PEER_WARMUP" --data "$data" --json
  wait_idle >&2
  # stdout carries this function's answer, so the log takes all of the peer's output (no bench_run_peer)
  DS_ACCELERATOR=cpu "${peer_cmd[@]}" > "$dir/log" 2>&1 ||
    { echo "FAILED: ${dir#$root/}/log" >&2; echo 0 0; return; }
  grep '^{' "$dir/log" | tail -n 1 | python3 -c 'import json, sys
r = json.load(sys.stdin); print(r["tokens_per_s"], r["routing_imbalance"])'
}

declare -A ratios
for round in $(seq 1 "$ROUNDS"); do
  read -r mt mt_imbalance < <(run_meshtrain "$OUT/meshtrain-r$round")
  line="  round $round: meshtrain $(printf '%.0f' "$mt") tok/s (routing imbalance $mt_imbalance)"
  for d in "${peers[@]}"; do
    read -r tps imbalance < <(peer "$OUT/$d-r$round" "$d")
    ratio=$(python3 -c "print(f'{$mt / $tps:.2f}x' if $tps > 0 and $mt > 0 else 'n/a')")  # 0: a run failed
    ratios[$d]+="$ratio "
    line+="; $d $(printf '%.0f' "$tps") tok/s (meshtrain ${ratio}, routing imbalance $imbalance)"
  done
  echo "$line"
  if [ -n "$bf16_peak_2" ] && [ "$mt" != 0 ]; then
    python3 -c 'import sys
tps, peak, E, K = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, "bench")
from model_flops import flops_per_token
fpt = flops_per_token(6, 384, 256, top_k=K, n_expert=E)  # config B, K experts a token and the router
g = tps * fpt / 1e9
print("    meshtrain: %.0f model GFLOP/s (top-%d of %d experts) = %.0f%% of the bf16 GEMM rate on 2 threads (%.0f GFLOP/s)" % (g, K, E, 100 * g / peak, peak))' "$mt" "$bf16_peak_2" "$EXPERTS" "$TOP_K"
  fi
done
for d in "${peers[@]}"; do
  echo "moe_peer: meshtrain / PyTorch MoE ($d dispatch), 2 processes x 1 thread, expert parallelism 2: ${ratios[$d]}"
done
