# Two emulated hosts (network namespaces), one torchrun agent in each
# (--nnodes=2, c10d rendezvous on host 0), 2 workers per host over TCP: the
# job ends with parameters bitwise equal to `meshtrain launch --nproc 4` on
# one host with the same transport and algorithm. Both "hosts" share this
# machine's hostname, so each agent is told its own address (--local_addr)
# and whether it hosts the rendezvous (is_host), as on a cluster whose
# hostnames do not resolve to the cluster network.
# With the current PyTorch's torchrun; Debian's 1.13 (no --local_addr) runs
# the same job with the static rendezvous (--node_rank, MASTER_ADDR given).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
source "$(dirname "$0")/torchrun_lib.sh"
[ ${#TORCHRUN_NEW[@]} -gt 0 ] || echo "SKIP (part): $new_torchrun_note"
[ ${#TORCHRUN_OLD[@]} -gt 0 ] || echo "SKIP (part): $old_torchrun_note"
[ ${#TORCHRUN_OLD[@]} -gt 0 ] || [ ${#TORCHRUN_NEW[@]} -gt 0 ] || { echo "SKIP: no torchrun"; exit 77; }
two_hosts "mt$$"

make_text data.txt 100000
tiny_config job.toml "$WORK/data.txt"
ARGS=(--parallel.data=allreduce --parallel.transport=tcp --parallel.all_reduce=ring --parallel.timeout_s=60
      --training.batch_size=2)
"$MESHTRAIN" launch --nproc 4 -- "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/ref" > ref.log 2>&1 ||
  { cat ref.log; fail "reference run under meshtrain launch"; }

# two_agents NAME TORCHRUN-ARGS-FOR-HOST-0 -- TORCHRUN-ARGS-FOR-HOST-1: one agent per host.
two_agents() {
  local name="$1"; shift
  local args0=() args1=()
  while [ "$1" != "--" ]; do args0+=("$1"); shift; done
  shift
  args1=("$@")
  ip netns exec "$H0" timeout 300 "${args0[@]}" --no_python "$MESHTRAIN" train job.toml "${ARGS[@]}" \
    --training.out_dir="$WORK/$name" > "$name-host0.log" 2>&1 &
  local pid0=$!
  ip netns exec "$H1" timeout 300 "${args1[@]}" --no_python "$MESHTRAIN" train job.toml "${ARGS[@]}" \
    --training.out_dir="$WORK/$name" > "$name-host1.log" 2>&1 &
  local pid1=$! status=0
  wait "$pid0" || status=1
  wait "$pid1" || status=1
  [ $status -eq 0 ] || { tail -n 30 "$name"-host*.log; fail "$name: a torchrun agent failed"; }
  grep -h "rendezvous through torchrun's agent store" "$name"-host*.log > /dev/null ||
    { cat "$name"-host*.log; fail "$name: not through the agent store"; }
  grep -h "4 workers, all-reduce ring over tcp" "$name"-host*.log > /dev/null ||
    { cat "$name"-host*.log; fail "$name: not 4 workers over tcp"; }
  cmp "$(params_file "$WORK/ref/checkpoints/step_00000020")" "$(params_file "$WORK/$name/checkpoints/step_00000020")" ||
    fail "$name: final parameters differ from one host's"
  echo "$name: bitwise equal to one host"
}

port=29400
if [ ${#TORCHRUN_NEW[@]} -gt 0 ]; then
  c10d=(--nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint="$ADDR0:$port" --rdzv_id="mt$$")
  two_agents current-c10d "${TORCHRUN_NEW[@]}" "${c10d[@]}" --rdzv_conf=is_host=1 --local_addr="$ADDR0" -- \
    "${TORCHRUN_NEW[@]}" "${c10d[@]}" --rdzv_conf=is_host=0 --local_addr="$ADDR1"
fi
if [ ${#TORCHRUN_OLD[@]} -gt 0 ]; then
  static=(--nnodes=2 --nproc_per_node=2 --master_addr="$ADDR0" --master_port=$((port + 1)))
  two_agents torch113-static "${TORCHRUN_OLD[@]}" "${static[@]}" --node_rank=0 -- \
    "${TORCHRUN_OLD[@]}" "${static[@]}" --node_rank=1
fi
echo "torchrun on two hosts ok"
