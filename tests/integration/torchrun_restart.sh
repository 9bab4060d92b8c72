# torchrun's own restarts: a worker killed with SIGKILL mid-run under
# --max_restarts=1. The agent restarts the whole group (TORCHELASTIC_RESTART_COUNT
# 1: a new job id and store prefix, so the new group never reads the old one's
# keys); it resumes from the newest complete checkpoint and ends with
# parameters bitwise equal to an uninterrupted `meshtrain launch` run.
# Uses the current PyTorch's torchrun, else Debian's.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
source "$(dirname "$0")/torchrun_lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
TORCHRUN=("${TORCHRUN_NEW[@]}")
[ ${#TORCHRUN[@]} -gt 0 ] || TORCHRUN=("${TORCHRUN_OLD[@]}")
[ ${#TORCHRUN[@]} -gt 0 ] || { echo "SKIP: $old_torchrun_note, and $new_torchrun_note"; exit 77; }

chaos_job
ARGS=(--parallel.data=allreduce --parallel.transport=tcp --parallel.timeout_s=30 --checkpoint.every=4 --checkpoint.keep=5
      --training.steps=20 --resume "${CHAOS_MODEL[@]}")
"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/straight" \
  > straight.log 2>&1 || { cat straight.log; fail "uninterrupted run"; }

port="$(free_port)"
timeout 300 "${TORCHRUN[@]}" --nproc_per_node=2 --nnodes=1 --max_restarts=1 --master_port="$port" --no_python \
  "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/killed" > killed.log 2>&1 &
run_pid=$!
# The agent may start workers through a helper process: find rank 1 among
# the processes of this job's command line by its environment.
while kill -0 "$run_pid" 2> /dev/null && ! reached "$WORK/killed/metrics.jsonl" 5; do sleep 0.05; done
victim=""
for pid in $(pgrep -f -- "--training.out_dir=$WORK/killed"); do
  { tr '\0' '\n' < "/proc/$pid/environ"; } 2> /dev/null | grep -qx "RANK=1" &&
    [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$MESHTRAIN")" ] && victim=$pid
done
[ -n "$victim" ] || { cat killed.log; fail "no worker with RANK=1 to kill (finished already?)"; }
killed_at="$(latest_step "$WORK/killed/metrics.jsonl")"
kill -9 "$victim"
wait "$run_pid" || { cat killed.log; fail "torchrun failed after rank 1 was killed"; }
grep -q "keys under /meshtrain/torchrun-.*-a1/" killed.log || { cat killed.log; fail "no restarted group (attempt 1)"; }
grep -q "resum" killed.log || { cat killed.log; fail "the restarted group did not resume from a checkpoint"; }
final_params "$WORK/straight" 20 straight.safetensors
final_params "$WORK/killed" 20 killed.safetensors
cmp straight.safetensors killed.safetensors || fail "parameters differ from the uninterrupted run"
echo "torchrun restart: rank 1 killed after step $killed_at; the restarted group resumed to the same bits"
