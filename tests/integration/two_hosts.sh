# Two "hosts" as Linux network namespaces joined by a veth pair, two workers
# in each, train over TCP to the same numbers as one process on the same
# global batch:
#   - data parallelism across all four workers;
#   - tensor parallelism inside each host, data parallelism across them: the
#     two workers of a host form one tensor group (tensor ways vary fastest
#     in the rank, so a launcher's consecutive local ranks hold a group) and
#     the two groups reduce gradients over the veth link.
# Needs root (CAP_SYS_ADMIN) and iproute2; skipped (exit 77) where namespaces
# cannot be made, as in an unprivileged container.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
tag="mt$$"
two_hosts "$tag"

make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
common=(--training.log_every=1 --checkpoint.every=0 --parallel.timeout_s=60)
"$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size=16 --training.out_dir="$WORK/single" > single.log 2>&1 ||
  { cat single.log; fail "single process"; }

# hosts NAME EXPECTED_LOG_LINE ARGS...: ranks 0 and 1 on host 0 (which holds
# the rendezvous), 2 and 3 on host 1, started as a cluster's launcher would
# (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT);
# the global batch is 16.
hosts() {
  local name=$1 expected=$2 port=$((20000 + ($$ + RANDOM) % 20000)) pids=()
  shift 2
  for rank in 0 1 2 3; do
    host=$([ $rank -lt 2 ] && echo "$H0" || echo "$H1")
    ip netns exec "$host" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=$ADDR0 MASTER_PORT=$port MESHTRAIN_JOB_ID="$name-$tag" MESHTRAIN_JOB_TOKEN="$tag-secret" \
      "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=allreduce --parallel.bucket_mb=0.05 \
      --training.out_dir="$WORK/$name" "$@" > "rank$rank-$name.log" 2>&1 &
    pids+=($!)
  done
  wait_ranks "$name: a rank failed" "${pids[@]}"
  grep -q "$expected" "rank0-$name.log" || { cat "rank0-$name.log"; fail "$name: no '$expected' in the log"; }
  compare_losses "$WORK/single/metrics.jsonl" "$WORK/$name/metrics.jsonl" 1e-5 || fail "$name: losses differ"
  compare_params "$WORK/single/checkpoints/step_00000020/model.safetensors" \
                 "$(params_file "$WORK/$name/checkpoints/step_00000020")" 1e-5 || fail "$name: parameters differ"
}

hosts data-parallel "all-reduce auto over tcp" --training.batch_size=4
hosts tensor-in-hosts "tensor parallel: 2 ways (pp=1 x dp=2 (ep=1) x tp=2 (4 workers) over tcp" \
  --parallel.tensor=2 --training.batch_size=8
echo "two hosts train like one process (data parallel; tensor groups inside hosts)"
