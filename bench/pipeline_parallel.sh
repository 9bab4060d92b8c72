#!/usr/bin/env bash
# Pipeline parallelism on this machine, three measurements, each meshtrain run with 1 compute thread per
# process and its last step traced (--trace):
#
# 1. Bubbles: config B with $BUBBLE_LAYERS layers (default 8, so 4 stages x 2 chunks get one each), micro-
#    batches of one sequence (256 tokens), every schedule at P = 2 and 4 and M in $BUBBLE_M:
#      meshtrain launch --nproc P -- meshtrain train examples/gpt-bench-b.toml --training.threads=1
#        --model.n_layer=8 --training.batch_size=M --parallel.pipeline=P --parallel.micro_batches=M
#        --parallel.schedule=S [--parallel.virtual_stages=2] --training.steps=$MT_STEPS --trace T.json
#    the bubble measured from the trace (pipeline_bubbles.py: the share of P x step time the stages of the
#    last step spent outside forward/backward/weight actions) against the schedule's formula:
#      gpipe, 1f1b (P-1)/(M+P-1)   interleaved (V=2) (P-1)/(V*M+P-1)   zero_bubble (ZB-H1) (P-1)/(3M+P-1)
#    P = 4 runs 4 processes on the 2 cores: the bubble is still measured, but the stages share cores.
# 2. Efficiency, P = 2: tokens/s of 2 stages x 1 thread against 2 x (one process x 1 thread, the same
#    micro-batches one after another) x (1 - the formula's bubble); target >= 95%. Beside it the same with
#    two single processes running at once, one of them: what 2 processes reach on this machine.
# 3. Against torch.distributed.pipelining (bench/peers/torch_pp_gpt.py, bench/.venv): config B (L=6, batch
#    8), P = 2, M = 4, 1 thread per process, gloo; GPipe, 1F1B, interleaved (V=2), and PyTorch's zero-bubble
#    schedules (ScheduleInterleavedZeroBubble at V=1 and 2, ScheduleZBVZeroBubble) against meshtrain's
#    zero_bubble (ZB-H1); and both on one process x 1 thread (torch_gpt.py, meshtrain train), so
#      (meshtrain pp / PyTorch pp) / (meshtrain 1 process / PyTorch 1 process)  target >= 1 per schedule.
#
# PRECISION=bf16 runs every meshtrain job with --training.precision=bf16 and every peer with --precision bf16
# (forward and loss under torch.autocast), measures the machine's bf16 GEMM rate (bench_gemm --bf16-peak)
# and reports part 3's model GFLOP/s as a share of it, against a target of 1.5x PyTorch's same schedule.
#
# Both sides clip the gradients' global norm to CLIP (meshtrain's default optimizer.grad_clip, 1.0; the
# peers as torchtitan does over a pipeline: every stage's squares all-reduced before any stage steps), so
# both do the same work and wait for the same last backward; CLIP=0 turns it off on both sides.
#
# Knobs: ROUNDS [2]  PRECISION [fp32]  CLIP [1.0]  PARTS ["bubbles efficiency torch"]  BUBBLE_LAYERS [8]  BUBBLE_M ["4 8 16"]
#   BUBBLE_P ["2 4"]  MT_STEPS [6]  MT_SKIP [2]  TORCH_STEPS [8] TORCH_WARMUP [2]  SCHEDULES ["gpipe 1f1b
#   interleaved zero_bubble"]  TORCH_SCHEDULES ["gpipe 1f1b interleaved zero_bubble-v1 zero_bubble zbv"] (part 3's
#   PyTorch schedules; zero_bubble-v1: ScheduleInterleavedZeroBubble at V=1; a -noclip suffix, e.g. 1f1b-noclip:
#   that schedule with CLIP=0 on the peer)  VENV_PY [bench/.venv/bin/python]  MESHTRAIN [build/src/meshtrain/meshtrain]
#   OUT [bench/out/pipeline_parallel]  IDLE_WAIT [60] IDLE_PCT [15]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
ROUNDS="${ROUNDS:-2}"
PRECISION="${PRECISION:-fp32}"
CLIP="${CLIP:-1.0}"
PARTS="${PARTS:-bubbles efficiency torch}"
BUBBLE_LAYERS="${BUBBLE_LAYERS:-8}"
BUBBLE_M="${BUBBLE_M:-4 8 16}"
BUBBLE_P="${BUBBLE_P:-2 4}"
MT_STEPS="${MT_STEPS:-6}"
MT_SKIP="${MT_SKIP:-2}"
TORCH_STEPS="${TORCH_STEPS:-8}"
TORCH_WARMUP="${TORCH_WARMUP:-2}"
SCHEDULES="${SCHEDULES:-gpipe 1f1b interleaved zero_bubble}"
TORCH_SCHEDULES="${TORCH_SCHEDULES:-gpipe 1f1b interleaved zero_bubble-v1 zero_bubble zbv}"
VENV_PY="${VENV_PY:-$root/bench/.venv/bin/python}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/pipeline_parallel}"
IDLE_WAIT="${IDLE_WAIT:-60}"
IDLE_PCT="${IDLE_PCT:-15}"
export MESHTRAIN OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
source bench/bench_lib.sh
bench_results
toml=examples/gpt-bench-b.toml

cpu_flags="$(bench_cpu_flags avx2 fma avx512f avx512_bf16 amx_bf16)"
echo "pipeline_parallel: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(getconf _NPROCESSORS_ONLN) CPUs," \
     "CPU: $(bench_cpu_model); flags: ${cpu_flags:-none};" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; PyTorch: $(bench_torch_version "$VENV_PY" none);" \
     "precision $PRECISION, gradient clipping $CLIP"
bf16_peak_2=""
[ "$PRECISION" = bf16 ] && bench_bf16_peak "$OUT/gemm.txt"

# mt LABEL ROUND NPROC [train overrides...]: one meshtrain run; appends its summary to $results.
mt() {
  local label="$1" round="$2" nproc="$3"
  shift 3
  local dir="$OUT/$label-r$round"
  rm -rf "$dir"
  mkdir -p "$dir"
  local train=("$MESHTRAIN" train "$toml" --training.threads=1 --training.steps="$MT_STEPS" --training.log_every=1
               --training.precision="$PRECISION" --optimizer.grad_clip="$CLIP" --training.out_dir="$dir/run" --metrics.path="$dir/metrics.jsonl" "$@")
  [ "$nproc" -gt 1 ] && train=("$MESHTRAIN" launch --nproc "$nproc" --transport shm -- "${train[@]}"
                               --parallel.data=none --trace "$dir/trace.json")
  wait_idle
  if [ -n "${MT_PAIR:-}" ]; then  # a twin beside it, its figures not kept
    "${train[@]/$dir\/run/$dir/twin}" --metrics.path="$dir/twin.jsonl" > "$dir/twin.log" 2>&1 &
  fi
  local rc=0
  "${train[@]}" > "$dir/log" 2>&1 || rc=$?
  wait  # the twin, even when the measured run failed
  if [ "$rc" != 0 ]; then echo "  $label: FAILED (${dir#$root/}/log)"; tail -n 3 "$dir/log"; return; fi
  python3 bench/pipeline_bubbles.py summary "$label" "$round" "$dir" "$MT_SKIP" "$*" >> "$results" &&
    tail -n 1 "$results" | python3 bench/pipeline_bubbles.py show
}

# torch LABEL ROUND PEER ARGS...: one run of the PyTorch peer PEER (its JSON line) appended to $results.
# (Not bench_run_peer: this script prints no command lines.)
torch() {
  local label="$1" round="$2"
  shift 2
  [ -x "$VENV_PY" ] || { echo "  $label: SKIPPED: no $VENV_PY (bench/setup-venv.sh)"; return; }
  bench_peer_cmd "$VENV_PY" "$@" --precision "$PRECISION" --clip "$CLIP" --json
  wait_idle
  local line
  if line="$("${peer_cmd[@]}" 2> "$OUT/$label-r$round.err" | grep '^{' | tail -n 1)" && [ -n "$line" ]; then
    bench_record "$line" "label=$label" "round:=$round" runner=torch
    tail -n 1 "$results" | python3 bench/pipeline_bubbles.py show
  else
    echo "  $label: FAILED ($OUT/$label-r$round.err)"; tail -n 3 "$OUT/$label-r$round.err"
  fi
}

chunks() { [ "$1" = interleaved ] && echo 2 || echo 1; }

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round"
  if [[ " $PARTS " == *" bubbles "* ]]; then
    for P in $BUBBLE_P; do
      for M in $BUBBLE_M; do
        for S in $SCHEDULES; do
          [ "$S" = interleaved ] && [ $((M % P)) -ne 0 ] && continue
          mt "bubble-$S-p$P-m$M" "$round" "$P" --model.n_layer="$BUBBLE_LAYERS" --training.batch_size="$M" \
            --parallel.pipeline="$P" --parallel.micro_batches="$M" --parallel.schedule="$S" \
            --parallel.virtual_stages="$(chunks "$S")"
        done
      done
    done
  fi
  if [[ " $PARTS " == *" efficiency "* ]]; then
    for M in $BUBBLE_M; do
      one=(--model.n_layer="$BUBBLE_LAYERS" --training.batch_size="$M" --parallel.micro_batches="$M")
      mt "one-m$M" "$round" 1 "${one[@]}"
      # Two at once: what 2 processes on this machine's 2 cores reach each (shared caches and memory).
      MT_PAIR=1 mt "two-m$M" "$round" 1 "${one[@]}"
    done
  fi
  if [[ " $PARTS " == *" torch "* ]]; then
    mt "mt-one" "$round" 1
    torch "torch-one" "$round" torch_gpt.py --layers 6 --d 384 --heads 6 --ctx 256 --batch 8 --threads 1 \
      --steps "$TORCH_STEPS" --warmup "$TORCH_WARMUP" --wait unset
    for S in $SCHEDULES; do
      mt "mt-pp2-$S" "$round" 2 --parallel.pipeline=2 --parallel.micro_batches=4 --parallel.schedule="$S" \
        --parallel.virtual_stages="$(chunks "$S")"
    done
    for name in $TORCH_SCHEDULES; do
      S=${name%-noclip}
      [ "$S" = zero_bubble-v1 ] && S="zero_bubble --virtual-stages 1"
      clip=$CLIP
      [ "$name" != "${name%-noclip}" ] && clip=0  # the peer without clipping, beside the clipped one
      # shellcheck disable=SC2086  # $S: the schedule and, for zero_bubble-v1, its chunk count
      CLIP=$clip torch "torch-pp2-$name" "$round" torch_pp_gpt.py --config b --procs 2 --micro-batches 4 \
        --schedule $S --steps "$TORCH_STEPS" --warmup "$TORCH_WARMUP"
    done
  fi
done
python3 bench/pipeline_bubbles.py report "$results" "$bf16_peak_2"
