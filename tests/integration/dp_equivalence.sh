# Synchronous data parallelism trains the same numbers as one process on the
# same global batch: N workers with batch B against one process with batch
# N*B, loss at every step and parameters after 20 steps within 1e-5
# (relative), for N = 2 and 4, over shared memory, TCP and the Reduction
# Server, and for each all-reduce algorithm.
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
common=(--training.log_every=1 --checkpoint.every=0 --parallel.timeout_s=60)

single() {  # global batch
  local out="$WORK/single-$1"
  [ -d "$out" ] && return
  "$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size="$1" --training.out_dir="$out" > "$out.log" 2>&1 ||
    { cat "$out.log"; fail "single process, batch $1"; }
}

# parallel N TRANSPORT ALGORITHM [REDUCERS]
parallel() {
  local n=$1 transport=$2 algo=$3 reducers=${4:-0}
  local name="dp$n-$transport-$algo" out
  out="$WORK/$name"
  single $((4 * n))
  # --transport: the reducers use the workers' transport too.
  "$MESHTRAIN" launch --nproc "$n" --reducers "$reducers" --transport "$transport" -- \
    "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=allreduce --parallel.all_reduce="$algo" \
    --parallel.bucket_mb=0.01 --training.batch_size=4 --training.out_dir="$out" > "$out.log" 2>&1 ||
    { cat "$out.log"; fail "$name"; }
  grep -q "global batch $((4 * n)) ($n workers)" "$out.log" || { cat "$out.log"; fail "$name: no global batch in the log"; }
  grep -q "all-reduce $algo over $transport" "$out.log" || { cat "$out.log"; fail "$name: not over $transport"; }
  echo "== $name"
  compare_losses "$WORK/single-$((4 * n))/metrics.jsonl" "$out/metrics.jsonl" 1e-5 || fail "$name: losses differ"
  compare_params "$WORK/single-$((4 * n))/checkpoints/step_00000020/model.safetensors" \
                 "$(params_file "$out/checkpoints/step_00000020")" 1e-5 || fail "$name: parameters differ"
}

for n in 2 4; do
  parallel $n shm ring
  parallel $n tcp ring
  parallel $n shm reduction_server $((n / 2))
  parallel $n tcp reduction_server $((n / 2))
done
parallel 4 shm tree
parallel 4 shm halving_doubling
parallel 2 shm auto
# Several small buckets (bucket_mb above) overlap with backward; one big one
# gives the same numbers.
out="$WORK/one-bucket"
"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=allreduce \
  --training.batch_size=4 --training.out_dir="$out" > "$out.log" 2>&1 || { cat "$out.log"; fail "one bucket"; }
grep -q "1 gradient buckets" "$out.log" || { cat "$out.log"; fail "expected one bucket"; }
cmp "$(params_file "$out/checkpoints/step_00000020")" "$(params_file "$WORK/dp2-shm-ring/checkpoints/step_00000020")" ||
  fail "bucket size changed the result of ring all-reduce"
# The linear scaling rule applies to the global batch: 2 workers with batch 4
# and lr tuned for batch 4 run at twice the lr, as one process with batch 8 does.
scaled=(--schedule.scale_rule=linear --schedule.reference_batch=4)
"$MESHTRAIN" train job.toml "${common[@]}" "${scaled[@]}" --training.batch_size=8 --training.out_dir="$WORK/scaled-1" \
  > scaled-1.log 2>&1 || { cat scaled-1.log; fail "scaled single"; }
"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${common[@]}" "${scaled[@]}" --parallel.data=allreduce \
  --training.batch_size=4 --training.out_dir="$WORK/scaled-2" > scaled-2.log 2>&1 || { cat scaled-2.log; fail "scaled 2 workers"; }
grep -q "per-device batch 4, global batch 8 (2 workers) | base lr 0.001, scale rule linear (reference batch 4) -> effective lr 0.002" \
  scaled-2.log || { cat scaled-2.log; fail "the log does not show the scaled lr for the global batch"; }
compare_losses "$WORK/scaled-1/metrics.jsonl" "$WORK/scaled-2/metrics.jsonl" 1e-5 || fail "scaled: losses differ"
grep -q '"effective_lr":0.002' "$WORK/scaled-2/metrics.jsonl" || fail "metrics lack the effective lr"
# Several ranks without data parallelism would train alone side by side: refused.
if "$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml > alone.log 2>&1; then fail "two ranks with parallel.data = none ran"; fi
grep -q 'but parallel.data = "none"' alone.log || { cat alone.log; fail "no clear error for ranks without data parallelism"; }
echo "data-parallel equivalence holds"
