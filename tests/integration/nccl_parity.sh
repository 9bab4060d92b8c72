# Workers on GPUs of their own, their collectives over NCCL (docs/gpu.md), for a machine with
# several GPUs: skipped, saying why, with fewer than 2 (the device tool lends one; no session has
# run this yet). Each layout trains the tiny GPT as one GPU process does on the same global batch
# (fp32 losses within the one-GPU tolerance, 1e-3, over 20 steps), and its log says NCCL carries
# the collectives: data parallelism, ZeRO-1 and ZeRO-3, tensor parallelism with sequence
# parallelism, a 1F1B pipeline, expert parallelism; with 4 GPUs data x tensor and pipeline x
# tensor. Then a data-parallel worker killed with -9 mid-run: `meshtrain run` restarts the job,
# which resumes from its last checkpoint to the bits of an uninterrupted run.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/chaos_lib.sh"
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
[ "${gpus:-0}" -ge 2 ] || { echo "SKIP: ${gpus:-0} GPU(s) visible here; NCCL's suites need 2 or more"; exit 77; }
make_text text.txt 100000
tiny_config job.toml "$WORK/text.txt"
common=(--training.precision=fp32 --training.log_every=1 --training.eval_every=10 --parallel.timeout_s=120)
moe=(--model.n_expert=4 --model.top_k=2)

one() {  # one NAME ARGS...: one process on GPU 0
  local name=$1; shift
  "$MESHTRAIN" train job.toml --training.device=cuda:0 "${common[@]}" "$@" --training.out_dir="$WORK/$name" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
}
one one
one one-moe "${moe[@]}"

# training.batch_size is a worker's: 2 on each of 2 data ways, one process's 4.
half=--training.batch_size=2
layouts=("dp2:2:one:--parallel.data=allreduce $half"
         "zero1:2:one:--parallel.data=allreduce --parallel.zero_stage=1 $half"
         "zero3:2:one:--parallel.data=allreduce --parallel.zero_stage=3 $half"
         "tp2:2:one:--parallel.tensor=2 --parallel.sequence_parallel=true"
         "pp2:2:one:--parallel.pipeline=2 --parallel.micro_batches=2"
         "ep2:2:one-moe:--parallel.data=allreduce --parallel.expert=2 ${moe[*]} $half")
[ "$gpus" -ge 4 ] && layouts+=("dp2-tp2:4:one:--parallel.data=allreduce --parallel.tensor=2 $half"
                                "pp2-tp2:4:one:--parallel.pipeline=2 --parallel.tensor=2 --parallel.micro_batches=2")
for layout in "${layouts[@]}"; do
  IFS=: read -r name workers baseline rest <<< "$layout"; read -r -a args <<< "$rest"
  "$MESHTRAIN" launch --nproc "$workers" -- "$MESHTRAIN" train job.toml --parallel.workers="$workers" "${args[@]}" \
    --training.device=cuda --parallel.device_collectives=nccl "${common[@]}" --training.out_dir="$WORK/$name" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name over NCCL"; }
  grep -q "device collectives: NCCL" "$name.log" || { cat "$name.log"; fail "$name: not over NCCL"; }
  compare_losses "$WORK/$baseline/metrics.jsonl" "$WORK/$name/metrics.jsonl" 1e-3 ||
    fail "$name over NCCL: losses differ from one GPU's beyond 1e-3"
  echo "$name: $workers GPUs over NCCL train as one GPU does"
done

# kill -9 of a worker mid-run; the restarted job resumes to an uninterrupted run's bits.
killed_at=$(killed_same_bits nccl-kill 20 8 1 --nproc 2 --parallel.data=allreduce --training.device=cuda \
  --parallel.device_collectives=nccl --checkpoint.every=4 --training.steps=20 "${CHAOS_MODEL[@]}" \
  --parallel.timeout_s=120) || exit 1
echo "worker 1 killed after step $killed_at over NCCL: restarted, resumed to the same bits"
