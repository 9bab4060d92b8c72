# Tensor parallelism inside hosts, data parallelism across them: two
# "hosts" as Linux network namespaces joined by a veth pair, two workers in
# each forming one tensor group (tensor ways vary fastest in the rank, so a
# launcher's consecutive local ranks hold a group), the two groups reducing
# gradients over TCP, train to the same numbers as one process on the same
# global batch. Needs root (CAP_SYS_ADMIN) and iproute2; skipped (exit 77)
# where namespaces cannot be made, as in an unprivileged container.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
tag="mt$$"
two_hosts "$tag"

make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
common=(--training.log_every=1 --checkpoint.every=0 --parallel.timeout_s=60)
"$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size=16 --training.out_dir="$WORK/single" > single.log 2>&1 ||
  { cat single.log; fail "single process"; }

# Ranks 0 and 1 on host 0 (which holds the rendezvous), 2 and 3 on host 1,
# started as a cluster's launcher would: RANK, WORLD_SIZE, LOCAL_RANK,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
port=$((20000 + $$ % 20000))
pids=()
for rank in 0 1 2 3; do
  host=$([ $rank -lt 2 ] && echo "$H0" || echo "$H1")
  ip netns exec "$host" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=$ADDR0 MASTER_PORT=$port MESHTRAIN_JOB_ID="tp-two-hosts-$tag" MESHTRAIN_JOB_TOKEN="$tag-secret" \
    "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=allreduce --parallel.tensor=2 \
    --parallel.bucket_mb=0.05 --training.batch_size=8 --training.out_dir="$WORK/hosts" > "rank$rank.log" 2>&1 &
  pids+=($!)
done
wait_ranks "a rank failed" "${pids[@]}"
grep -q "tensor parallel: 2 ways (pp=1 x dp=2 (ep=1) x tp=2 (4 workers) over tcp" rank0.log ||
  { cat rank0.log; fail "not a 2 x 2 mesh over TCP"; }
compare_losses "$WORK/single/metrics.jsonl" "$WORK/hosts/metrics.jsonl" 1e-5 || fail "losses differ"
compare_params "$WORK/single/checkpoints/step_00000020/model.safetensors" \
               "$(params_file "$WORK/hosts/checkpoints/step_00000020")" 1e-5 || fail "parameters differ"
echo "tensor groups inside two hosts train like one process"
