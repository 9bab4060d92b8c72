# Two emulated hosts (network namespaces), one torchrun agent in each
# (--nnodes=2, c10d rendezvous on host 0), 2 workers per host over TCP: the
# job ends with parameters bitwise equal to `meshtrain launch --nproc 4` on
# one host with the same transport and algorithm. Both "hosts" share this
# machine's hostname, so each agent is told its own address (--local_addr)
# and whether it hosts the rendezvous (is_host), as on a cluster whose
# hostnames do not resolve to the cluster network.
# Needs the current PyTorch's torchrun (Debian's 1.13 has no --local_addr).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
source "$(dirname "$0")/torchrun_lib.sh"
[ ${#TORCHRUN_NEW[@]} -gt 0 ] || { echo "SKIP: no $new_torchrun_note"; exit 77; }
two_hosts "mt$$"

make_text data.txt 100000
tiny_config job.toml "$WORK/data.txt"
ARGS=(--parallel.data=allreduce --parallel.transport=tcp --parallel.all_reduce=ring --parallel.timeout_s=60
      --training.batch_size=2)
"$MESHTRAIN" launch --nproc 4 -- "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/ref" > ref.log 2>&1 ||
  { cat ref.log; fail "reference run under meshtrain launch"; }

port=29400
pids=()
for h in 0 1; do
  ns="$([ $h = 0 ] && echo "$H0" || echo "$H1")" addr="$([ $h = 0 ] && echo "$ADDR0" || echo "$ADDR1")"
  ip netns exec "$ns" timeout 300 "${TORCHRUN_NEW[@]}" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d \
    --rdzv_endpoint="$ADDR0:$port" --rdzv_id="mt$$" --rdzv_conf="is_host=$([ $h = 0 ] && echo 1 || echo 0)" \
    --local_addr="$addr" --no_python \
    "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/hosts" > "host$h.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ $status -eq 0 ] || { tail -n 30 host*.log; fail "a torchrun agent failed"; }
grep -h "rendezvous through torchrun's agent store" host*.log > /dev/null || { cat host*.log; fail "not through the agent store"; }
grep -h "4 workers, all-reduce ring over tcp" host*.log > /dev/null || { cat host*.log; fail "not 4 workers over tcp"; }
cmp "$(params_file "$WORK/ref/checkpoints/step_00000020")" "$(params_file "$WORK/hosts/checkpoints/step_00000020")" ||
  fail "final parameters differ from one host's"
echo "torchrun on two hosts: bitwise equal to one host"
