# Kubeflow's PyTorchJob sets exactly RANK, WORLD_SIZE, MASTER_ADDR and
# MASTER_PORT in each pod. Two emulated hosts (network namespaces) with two
# ranks each, given just those: with transport "auto" the ranks must learn at
# rendezvous that they are on two hosts and train over TCP (not shared memory
# across "pods"), ending bitwise equal to `meshtrain launch --nproc 4` over
# TCP with the same algorithm. The ranks of host 1 also name their network
# interface (MESHTRAIN_SOCKET_IFNAME); a name that does not exist is a clear
# error before anything waits.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
two_hosts "mt$$"

make_text data.txt 100000
tiny_config job.toml "$WORK/data.txt"
ARGS=(--parallel.data=allreduce --parallel.all_reduce=ring --parallel.timeout_s=60 --training.batch_size=2)
"$MESHTRAIN" launch --nproc 4 -- "$MESHTRAIN" train job.toml "${ARGS[@]}" --parallel.transport=tcp \
  --training.out_dir="$WORK/ref" > ref.log 2>&1 || { cat ref.log; fail "reference run under meshtrain launch"; }

RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" MESHTRAIN_SOCKET_IFNAME=nosuch0 \
  expect_failure "MESHTRAIN_SOCKET_IFNAME='nosuch0': this host has no such network interface (it has: lo" \
  timeout 20 "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/bad"

port=23456  # PyTorchJob's default
pids=()
for rank in 0 1 2 3; do
  if [ $rank -lt 2 ]; then ns="$H0" ifname=(); else ns="$H1" ifname=(MESHTRAIN_SOCKET_IFNAME="$IF1"); fi
  ip netns exec "$ns" env -i PATH="$PATH" RANK=$rank WORLD_SIZE=4 MASTER_ADDR="$ADDR0" MASTER_PORT=$port \
    "${ifname[@]}" timeout 300 "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/pods" \
    > "rank$rank.log" 2>&1 &
  pids+=($!)
done
wait_ranks "a rank failed" "${pids[@]}"
grep -q "they told each other: 2 hosts, 2 of 4 ranks on this one" rank0.log || { cat rank0.log; fail "hosts not learned"; }
grep -q "4 workers, all-reduce ring over tcp" rank0.log || { cat rank0.log; fail "did not train over TCP"; }
for rank in 2 3; do
  grep -q "rank $rank listens on $ADDR1 (MESHTRAIN_SOCKET_IFNAME=$IF1)" "rank$rank.log" ||
    { cat "rank$rank.log"; fail "rank $rank did not use its named interface"; }
done
cmp "$(params_file "$WORK/ref/checkpoints/step_00000020")" "$(params_file "$WORK/pods/checkpoints/step_00000020")" ||
  fail "final parameters differ from meshtrain launch's"
echo "PyTorchJob environment on two hosts: TCP, bitwise equal to one host"
