# training.device = "cuda" on a machine without a usable GPU: one message
# naming the reason, exit status 3 (bad input: a supervisor does not retry),
# before any data is read or any file written. CPU jobs are unchanged.
source "$(dirname "$0")/lib.sh"
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  echo "SKIP: this machine has a GPU (scripts/gpu-check.sh tests that case)"; exit 77
fi
make_text text.txt 100000
tiny_config job.toml "$WORK/text.txt"

# Which reason depends on the build: with the CUDA path the runtime answers
# (no driver, no device), without it the build says so.
"$MESHTRAIN" train --help > help.txt
grep -q "training.device" help.txt || fail "train --help lacks training.device"
reason="no usable GPU: no NVIDIA driver on this machine\|no usable GPU: the NVIDIA driver sees no GPU\|this meshtrain was built without CUDA"

expect_status() {  # expect_status STATUS PATTERN COMMAND...: the exit status and the one error line
  local want=$1 pattern=$2; shift 2
  local status=0
  "$@" > out.txt 2> err.txt || status=$?
  [ "$status" -eq "$want" ] || { cat out.txt err.txt; fail "exit status $status, not $want: $*"; }
  grep -q -- "$pattern" err.txt || { cat err.txt; fail "stderr lacks '$pattern': $*"; }
  [ "$(grep -c 'error' err.txt)" -eq 1 ] || { cat err.txt; fail "more than one error line: $*"; }
}

for device in cuda cuda:0 cuda:7; do
  expect_status 3 "$reason" "$MESHTRAIN" train job.toml --training.device=$device --training.out_dir="$WORK/gpu_$device"
  [ ! -e "$WORK/gpu_$device" ] || fail "training.device=$device wrote $WORK/gpu_$device before stopping"
done
# Under a launcher, "cuda" takes LOCAL_RANK; the message still names the reason.
LOCAL_RANK=1 expect_status 3 "$reason" "$MESHTRAIN" train job.toml --training.device=cuda
# A malformed value is a config error naming the key and the accepted forms.
expect_status 3 "training.device: device \"gpu0\" is not one of \"cpu\", \"cuda\", \"cuda:N\"" \
  "$MESHTRAIN" train job.toml --training.device=gpu0

# NCCL carries the collectives of workers on GPUs only: asked for on the
# CPU, a config error before anything is written; an unknown engine is one too.
expect_status 3 'parallel.device_collectives = "nccl" needs workers on GPUs, but training.device = "cpu"' \
  "$MESHTRAIN" train job.toml --parallel.device_collectives=nccl --training.out_dir="$WORK/nccl_cpu"
[ ! -e "$WORK/nccl_cpu" ] || fail "device_collectives=nccl on the CPU wrote $WORK/nccl_cpu before stopping"
expect_status 3 "parallel.device_collectives" "$MESHTRAIN" train job.toml --parallel.device_collectives=gloo
expect_status 3 'parallel.data = "parameter_server": its servers are host processes' \
  "$MESHTRAIN" train job.toml --parallel.device_collectives=nccl --parallel.data=parameter_server

# meshtrain run does not restart a worker that stopped for this (status 3).
status=0
timeout 120 "$MESHTRAIN" run job.toml --nproc 1 --training.device=cuda --training.out_dir="$WORK/run_gpu" \
  > run.log 2>&1 || status=$?
[ "$status" -eq 3 ] || { cat run.log; fail "meshtrain run exited with $status, not 3"; }
grep -q "$reason" run.log || { cat run.log; fail "meshtrain run's output lacks the reason"; }
grep -q "status 3 (bad configuration or input: not restarted)" run.log || { cat run.log; fail "the worker was restarted"; }

# training.device = "cpu" (the default, spelled out) trains as before.
"$MESHTRAIN" train job.toml --training.device=cpu --training.steps=8 > cpu.log 2>&1 || { cat cpu.log; fail "cpu run"; }
grep -q "done: 8 steps" cpu.log || { cat cpu.log; fail "cpu run did not finish"; }
echo "no-GPU behaviour holds"
