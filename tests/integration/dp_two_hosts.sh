# Two "hosts" as Linux network namespaces joined by a veth pair, two workers
# in each, train over TCP to the same numbers as one process on the same
# global batch. Needs root (CAP_SYS_ADMIN) and iproute2; skipped (exit 77)
# where namespaces cannot be made, as in an unprivileged container.
source "$(dirname "$0")/lib.sh"
command -v ip > /dev/null || { echo "SKIP: no ip (iproute2)"; exit 77; }
tag="mt$$"
h0="$tag-h0" h1="$tag-h1"
cleanup() {
  ip netns del "$h0" 2> /dev/null || true
  ip netns del "$h1" 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$h0" 2> /dev/null || { echo "SKIP: cannot create network namespaces here"; exit 77; }
ip netns add "$h1"
ip link add "$tag-a" type veth peer name "$tag-b"
ip link set "$tag-a" netns "$h0"
ip link set "$tag-b" netns "$h1"
ip -n "$h0" addr add 10.78.0.1/24 dev "$tag-a"
ip -n "$h1" addr add 10.78.0.2/24 dev "$tag-b"
for h in "$h0" "$h1"; do
  ip -n "$h" link set lo up
done
ip -n "$h0" link set "$tag-a" up
ip -n "$h1" link set "$tag-b" up

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
  host=$([ $rank -lt 2 ] && echo "$h0" || echo "$h1")
  ip netns exec "$host" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=10.78.0.1 MASTER_PORT=$port MESHTRAIN_JOB_ID="two-hosts-$tag" MESHTRAIN_JOB_TOKEN="$tag-secret" \
    "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=allreduce --parallel.bucket_mb=0.05 \
    --training.batch_size=4 --training.out_dir="$WORK/hosts" > "rank$rank.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ $status -eq 0 ] || { tail -n 5 rank*.log; fail "a rank failed"; }
grep -q "all-reduce auto over tcp" rank0.log || { cat rank0.log; fail "did not train over TCP"; }
compare_losses "$WORK/single/metrics.jsonl" "$WORK/hosts/metrics.jsonl" 1e-5 || fail "losses differ"
compare_params "$WORK/single/checkpoints/step_00000020/model.safetensors" \
               "$(params_file "$WORK/hosts/checkpoints/step_00000020")" 1e-5 || fail "parameters differ"
echo "two hosts train like one process"
