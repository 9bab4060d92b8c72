#!/usr/bin/env bash
# The device check, run on a lent GPU machine (one H100 or H200, a CUDA 13
# driver, Python with PyTorch, 16 cores; no network, no CUDA toolkit, no
# build tools) from the working tree, with the bundle scripts/gpu-bundle.sh
# made on a build machine. Stages, each under its own time limit so the
# whole stays under 8 minutes:
#   info      nvidia-smi, the driver, glibc, Python and PyTorch versions
#   cublaslt  libcublasLt.so.13 found on this machine (Python's nvidia
#             packages, a CUDA install, the loader's cache) and put on
#             LD_LIBRARY_PATH; without it: exit 3, saying so
#   probe     `meshtrain train --training.device=cuda`: two steps of the
#             tiny GPT on the GPU (exit 0)
#   gemm_rate cuBLASLt's bf16 GEMM rate (bench/gpu/gemm_rate.cpp)
#   unit_cuda the GPU tests with MESHTRAIN_REQUIRE_GPU_TESTS=1 (a skip fails)
#   unit_nccl NCCL communicators of one rank, where the machine has libnccl.so.2
#   gpu_parity tests/integration/gpu_parity.sh: the GPU against the CPU
#             (1 and 20 steps, fp32 and bf16, repeatability, checkpoints
#             moved both ways, two workers sharing it, plan --config on the
#             GPU, one step of SGD, LARS and LAMB)
#   meshtrain_gpt2  meshtrain trains GPT-2 124M's shape in bf16 on the GPU
#             (examples/gpt-bench-gpt2.toml, batch 16, random token ids):
#             its tokens/s and mfu from the step records
#   plan_gpt2 `meshtrain plan --config` of that run on the GPU: its forecast
#             step beside the measured one in the summary
#   staged_overhead  bench/gpu/staged_overhead.sh: two workers sharing the
#             GPU (host-staged collectives) against one with their batch
#   torch_*   bench/gpu/torch_gpt2.py, PyTorch's GPT-2 124M step rate, eager
#             and torch.compile: the peer
#   gpu_restart  tests/integration/gpu_restart.sh, in the time left: four
#             workers sharing the GPU against one process, and a worker
#             killed with -9 whose restarted job ends on the same bits
# The stages work in a folder of their own under $TMPDIR (a GPT-2 run
# leaves a checkpoint of 1.5 GB); what lands in $OUT (default
# build/gpu-check) is three files, as the device tool brings back at most
# eight: gpu-check.log, summary.json, and stages.tar.gz (each stage's .out
# and .err, the gtest reports, facts, the step records; no token file, no file over 2 MiB).
# The whole summary.json is also printed last.
# Exit status: 0 every stage passed, 1 a stage failed, 3 no GPU or no cuBLASLt.
#
# Usage: scripts/gpu-check.sh [BUNDLE]   BUNDLE: the folder or .tar.gz of
# scripts/gpu-bundle.sh (default build/gpu-bundle, else build/gpu-bundle.tar.gz)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
results_dir=${OUT:-$root/build/gpu-check}
mkdir -p "$results_dir"
out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")  # the stages' files, packed into $results_dir at the end
exec > >(tee "$results_dir/gpu-check.log") 2>&1
tee_pid=$!

deadline=420  # seconds for all stages; kill grace, summary and slack fill the rest of 8 minutes
python=$(command -v python3 || command -v python || true)
: > "$out/stages.tsv"
note() { echo "gpu-check: $*"; }

# Writes summary.json from what the stages left in $out, then exits.
finish() {
  local status=$1
  if [ -n "$python" ]; then
    "$python" "$root/scripts/gpu_check_summary.py" "$out" "$status" "$SECONDS" ||
      note "summary.json could not be written"
  else
    printf '{"meshtrain_gpu_training": "not run", "exit_status": %d, "reason": "no Python on this machine"}\n' \
      "$status" > "$out/summary.json"
  fi
  cp "$out/summary.json" "$results_dir/summary.json" 2> /dev/null || true
  (cd "$out" && find . -type f -size -2097153c ! -path '*/checkpoints/*' ! -name '*.bin' ! -name summary.json -print0 |
    tar --null -czf "$results_dir/stages.tar.gz" -T -) || note "stages.tar.gz could not be written"
  echo "gpu-check: summary.json:"
  cat "$results_dir/summary.json" 2> /dev/null && echo || true
  note "summary: $results_dir/summary.json, each stage's output in $results_dir/stages.tar.gz; exit status $status (${SECONDS} s)"
  rm -rf "$out"
  if [ -n "${unpacked:-}" ]; then rm -rf "$unpacked"; fi
  exec > /dev/null 2>&1  # the log's tee ends once it has written everything
  wait "$tee_pid" 2> /dev/null || true
  exit "$status"
}
fact() { printf '%s=%s\n' "$1" "$2" >> "$out/facts.txt"; }
# Stopped from outside (the device tool's limit, Ctrl-C): what the stages
# left is still summed up and packed into $results_dir. The log goes straight to
# its file then: the signal may have ended tee with the rest of the
# pipeline, and a write to it would end this script. Stages run in the
# background and are waited for, so the trap runs at once.
running_stage=""  # the stage under way, and since when: for a signal's record
running_since=0
stopped() {
  exec >> "$results_dir/gpu-check.log" 2>&1
  tee_pid=""
  if [ -n "$running_stage" ]; then
    printf '%s\tstopped by a signal\t%d\t0\n' "$running_stage" $((SECONDS - running_since)) >> "$out/stages.tsv"
  fi
  note "stopped by a signal${running_stage:+ during $running_stage}"
  finish 1
}
trap stopped TERM INT
no_go() {  # no_go REASON: nothing here can run; exit 3
  note "$1"
  fact reason "$1"
  finish 3
}
: > "$out/facts.txt"

failed=0
# stage NAME MAX_S LATER_S COMMAND...: runs COMMAND with stdout in NAME.out
# and stderr in NAME.err (both shown after), under a limit of MAX_S seconds
# or what the deadline leaves once LATER_S seconds are kept for the stages
# after it. Sets stage_rc.
stage() {
  local name=$1 max=$2 later=$3
  shift 3
  local limit=$((deadline - SECONDS - later))
  [ "$limit" -le "$max" ] || limit=$max
  local start=$SECONDS result
  stage_rc=0
  if [ "$limit" -lt 5 ]; then
    result="skipped: out of time"
    stage_rc=124
  else
    running_stage=$name  # before its line: a signal seen after the line names the stage
    running_since=$SECONDS
    note "== $name (limit ${limit} s)"
    timeout --kill-after=5 "$limit" "$@" > "$out/$name.out" 2> "$out/$name.err" &
    wait $! || stage_rc=$?
    running_stage=""
    case $stage_rc in
      0) result=passed ;;
      124 | 137) result="timed out after ${limit} s" ;;
      *) result="failed (exit status $stage_rc)" ;;
    esac
  fi
  printf '%s\t%s\t%d\t%d\n' "$name" "$result" $((SECONDS - start)) "$limit" >> "$out/stages.tsv"
  tail -n 40 "$out/$name.err" 2> /dev/null | sed "s/^/  [$name] /" || true
  tail -n 20 "$out/$name.out" 2> /dev/null | cut -c1-400 | sed "s/^/  [$name] /" || true
  note "$name: $result"
}

# ---- the bundle ---------------------------------------------------------------
bundle=${1:-}
if [ -z "$bundle" ]; then
  bundle=$root/build/gpu-bundle
  [ -d "$bundle" ] || bundle=$root/build/gpu-bundle.tar.gz
fi
if [ -f "$bundle" ]; then
  unpacked=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX")
  tar -xzf "$bundle" -C "$unpacked"
  bundle=$(find "$unpacked" -mindepth 2 -maxdepth 2 -name MANIFEST -printf '%h\n' | head -n 1)
fi
if [ -z "$bundle" ] || [ ! -x "$bundle/bin/unit_cuda" ]; then
  no_go "no bundle at ${1:-$root/build/gpu-bundle[.tar.gz]}: make it on a build machine with scripts/gpu-bundle.sh"
fi
note "bundle $bundle: $(head -n 2 "$bundle/MANIFEST" | tr '\n' ';')"
fact bundle "$(sed -n 2p "$bundle/MANIFEST")"

# ---- info ---------------------------------------------------------------------
stage nvidia_smi 15 400 nvidia-smi || true
if [ "$stage_rc" -ne 0 ]; then
  no_go "nvidia-smi failed (exit status $stage_rc): no NVIDIA driver or no GPU on this machine"
fi
sed 's/^/  /' "$out/nvidia_smi.out"
IFS=, read -r gpu driver memory < <(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0) || true
fact gpu "$gpu"
fact driver "${driver# }"
fact gpu_memory "${memory# }"
fact cuda_driver_api "$(grep -o 'CUDA Version: [0-9.]*' "$out/nvidia_smi.out" | awk '{print $3}' || true)"
glibc=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}' || true)
fact glibc "$glibc"
# Workers sharing the GPU stage their gradients through shared memory.
fact dev_shm "$(df -h /dev/shm 2> /dev/null | awk 'NR == 2 {print $2 " (" $4 " free)"}' || true)"
built=$(cat "$bundle/GLIBC_VERSION")
if [ -n "$glibc" ] && [ "$(printf '%s\n%s\n' "$built" "$glibc" | sort -V | head -n 1)" = "$built" ]; then
  fact bundle_runs "on this machine's glibc $glibc (built with $built)"
else
  fact bundle_runs "under the bundled glibc $built's loader (this machine has ${glibc:-an unknown one})"
fi
[ -n "$python" ] || no_go "no python3 on this machine: the cuBLASLt search and the PyTorch peer need it"
stage versions 30 370 "$python" -c '
import platform
print("python=" + platform.python_version(), flush=True)
import torch
print("torch=" + torch.__version__)
print("torch_cuda=" + str(torch.version.cuda))
' || true
cat "$out/versions.out" >> "$out/facts.txt" || true

# ---- cuBLASLt ----------------------------------------------------------------------
# Not in the bundle (541 MB), nor NCCL (218 MB): the directory holding the
# library NAME on this machine. CUDA 13 pip wheels keep them under
# site-packages/nvidia (cu13/lib, nccl/lib; older layouts cublas/lib), else
# the CUDA toolkit's lib64 or the loader's cache.
# Prints one line at most: a second one into a closed `| head -n 1` would
# end this script (SIGPIPE under pipefail).
find_library() {
  local name=$1 d
  d=$(timeout 30 "$python" - "$name" << 'PY' 2> /dev/null || true
import glob, importlib.util, os, site, sys
name = sys.argv[1]
roots = []
spec = importlib.util.find_spec("nvidia")
if spec and spec.submodule_search_locations:
    roots += list(spec.submodule_search_locations)
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    roots.append(os.path.join(sp, "nvidia"))
spec = importlib.util.find_spec("torch")
if spec and spec.submodule_search_locations:
    roots += [os.path.join(p, "lib") for p in spec.submodule_search_locations]
for root in roots:
    for pattern in ("cu13/lib/" + name, "cublas/lib/" + name, "nccl/lib/" + name, name, "**/" + name):
        hits = glob.glob(os.path.join(root, pattern), recursive=True)
        if hits:
            print(os.path.dirname(os.path.realpath(hits[0])))
            sys.exit(0)
PY
  )
  if [ -n "$d" ]; then
    echo "$d"
    return
  fi
  for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
    /usr/lib/x86_64-linux-gnu /usr/lib64; do
    if [ -e "$d/$name" ]; then
      echo "$d"
      return
    fi
  done
  d=$( (ldconfig -p 2> /dev/null || /sbin/ldconfig -p 2> /dev/null || true) | awk -v n="$name" '$1 == n {print $NF; exit}')
  if [ -n "$d" ]; then dirname "$d"; fi
}
note "== cublaslt"
cublaslt_dir=$(find_library libcublasLt.so.13)
if [ -z "$cublaslt_dir" ]; then
  no_go "libcublasLt.so.13 (cuBLASLt of CUDA 13) is not on this machine: not in Python's nvidia packages (pip nvidia-cublas for CUDA 13: site-packages/nvidia/cu13/lib), /usr/local/cuda*/lib64 or the loader's cache. A PyTorch built for CUDA 12 brings libcublasLt.so.12, which meshtrain's CUDA 13 build cannot use."
fi
note "cuBLASLt: $cublaslt_dir"
fact cublaslt_dir "$cublaslt_dir"
export LD_LIBRARY_PATH="$cublaslt_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# For the bundled loader, where it is used: where the driver's libcuda.so.1 is.
libcuda=$( (ldconfig -p 2> /dev/null || /sbin/ldconfig -p 2> /dev/null || true) | awk '/libcuda\.so\.1 / {print $NF; exit}')
if [ -n "$libcuda" ]; then export MESHTRAIN_DRIVER_LIB_DIR; MESHTRAIN_DRIVER_LIB_DIR=$(dirname "$libcuda"); fi

# ---- meshtrain's device probe -------------------------------------------------------
probe=$out/probe
mkdir -p "$probe"
for _ in $(seq 300); do echo "and the lord said unto him behold i will make thee a great nation in the land"; done > "$probe/text.txt"
cat > "$probe/job.toml" << TOML
[model]
kind = "gpt"
n_layer = 2
n_embd = 32
n_head = 2
block_size = 32
[data]
path = "$probe/text.txt"
val_fraction = 0.1
[training]
batch_size = 4
steps = 2
threads = 1
out_dir = "$probe/run"
[optimizer]
name = "adamw"
lr = 1e-3
TOML
stage probe 20 345 "$bundle/bin/meshtrain" train "$probe/job.toml" --training.device=cuda || true
no_gpu=""
if [ "$stage_rc" -eq 0 ] && grep -q "done: 2 steps" "$out/probe.out"; then
  note "meshtrain trained two steps on the GPU"
elif [ "$stage_rc" -eq 3 ] && grep -q "no usable GPU" "$out/probe.err"; then
  # nvidia-smi sees a GPU the CUDA runtime cannot use (a driver older than
  # CUDA 13, ...): meshtrain's stages cannot run, the PyTorch peer still can.
  no_gpu=$(grep -m 1 -o "no usable GPU.*" "$out/probe.err")
  note "meshtrain's CUDA runtime cannot use this GPU: $no_gpu; skipping gemm_rate and unit_cuda"
else
  failed=1
fi
fact probe "$(grep -m 1 'error' "$out/probe.err" || echo "exit status $stage_rc, no error line")"
fact meshtrain_gpu_training "$([ "$stage_rc" -eq 0 ] && echo "trains (probe: two steps)" || echo "failed: see probe.err")"

# ---- cuBLASLt's GEMM rate ---------------------------------------------------------
if [ -z "$no_gpu" ]; then
  stage gemm_rate 75 320 "$bundle/bin/gemm_rate" || true
  [ "$stage_rc" -eq 0 ] || failed=1
fi

# ---- the GPU tests ----------------------------------------------------------------
if [ -z "$no_gpu" ]; then
  stage unit_cuda 150 290 env MESHTRAIN_REQUIRE_GPU_TESTS=1 "$bundle/bin/unit_cuda" \
    --gtest_output="json:$out/unit_cuda.json" || true
  [ "$stage_rc" -eq 0 ] || failed=1
  # NCCL's communicators of one rank (tests/unit/nccl/), where the machine has libnccl.so.2.
  nccl_dir=$(find_library libnccl.so.2)
  if [ -x "$bundle/bin/unit_nccl" ] && [ -n "$nccl_dir" ]; then
    stage unit_nccl 30 280 env MESHTRAIN_REQUIRE_GPU_TESTS=1 LD_LIBRARY_PATH="$nccl_dir:$LD_LIBRARY_PATH" \
      "$bundle/bin/unit_nccl" --gtest_output="json:$out/unit_nccl.json" || true
    [ "$stage_rc" -eq 0 ] || failed=1
    fact unit_nccl "$([ "$stage_rc" -eq 0 ] && echo passed || echo "failed: see unit_nccl.out")"
  else
    fact unit_nccl "not run: $([ -x "$bundle/bin/unit_nccl" ] && echo "no libnccl.so.2 on this machine" || echo "not in the bundle")"
  fi
  stage gpu_parity 115 190 bash "$root/tests/integration/gpu_parity.sh" "$bundle/bin/meshtrain" "$root" || true
  [ "$stage_rc" -eq 0 ] || failed=1
fi

# ---- meshtrain's GPT-2 124M rate: the benchmark -------------------------------------
# The same shape, batch and precision as the PyTorch peer below; the step
# records (one a step) carry tokens_per_s, mfu and flop_per_token, read by
# the summary whether or not the run got through every step in its time.
if [ -z "$no_gpu" ] && [ -n "$python" ]; then
  gpt2=$out/gpt2
  mkdir -p "$gpt2"
  "$python" -c 'import array, random, sys
r = random.Random(5)
array.array("H", (r.randrange(50257) for _ in range(1_000_000))).tofile(open(sys.argv[1], "wb"))' "$gpt2/tokens.bin"
  stage meshtrain_gpt2 60 160 "$bundle/bin/meshtrain" train "$root/examples/gpt-bench-gpt2.toml" \
    --training.device=cuda --training.batch_size=16 --training.steps=20 --training.threads=4 \
    --data.train_path="$gpt2/tokens.bin" --data.val_path="$gpt2/tokens.bin" --training.out_dir="$gpt2/run" || true
  [ "$stage_rc" -eq 0 ] || failed=1
  # The planner's forecast of that run from its own probe on this GPU (two steps): the summary
  # puts its step beside the measured one, the GPU forecast's first calibration.
  stage plan_gpt2 40 145 "$bundle/bin/meshtrain" plan --config "$root/examples/gpt-bench-gpt2.toml" --json \
    --training.device=cuda --training.batch_size=16 --training.threads=4 \
    --data.train_path="$gpt2/tokens.bin" --data.val_path="$gpt2/tokens.bin" || true
  [ "$stage_rc" -eq 0 ] || failed=1
  # The host-staged path's cost on one GPU: two workers sharing it against one with their batch.
  mkdir -p "$gpt2/staged"
  stage staged_overhead 50 130 env PYTHON="$python" bash "$root/bench/gpu/staged_overhead.sh" \
    "$bundle/bin/meshtrain" "$gpt2/tokens.bin" "$gpt2/staged" || true
  [ "$stage_rc" -eq 0 ] || failed=1
fi

# ---- the PyTorch peer -------------------------------------------------------------
stage torch_eager 75 100 "$python" "$root/bench/gpu/torch_gpt2.py" --mode eager || true
[ "$stage_rc" -eq 0 ] || failed=1
stage torch_compile 200 0 "$python" "$root/bench/gpu/torch_gpt2.py" --mode compile || true
[ "$stage_rc" -eq 0 ] || failed=1

# ---- last, in what time is left: four workers sharing the GPU, kill -9 and a bitwise restart ----
if [ -z "$no_gpu" ]; then
  stage gpu_restart 60 0 bash "$root/tests/integration/gpu_restart.sh" "$bundle/bin/meshtrain" "$root" || true
  [ "$stage_rc" -eq 0 ] || [ "$stage_rc" -eq 124 ] || failed=1
fi

if [ -n "$no_gpu" ]; then
  fact reason "$no_gpu"
  finish 3
fi
finish "$failed"
