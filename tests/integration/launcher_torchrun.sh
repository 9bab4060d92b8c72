# The worker binary under the real torchrun, 2 ranks over TCP on one host:
# Debian's torchrun (PyTorch 1.13, static rendezvous) and the current
# PyTorch's (c10d rendezvous, and --standalone). The agent already hosts a
# PyTorch TCPStore on MASTER_ADDR:MASTER_PORT, so every rank must be its
# client (older and newer protocol). Each run must end with parameters
# bitwise equal to `meshtrain launch --nproc 2` with the same transport and
# algorithm. A torchrun that is absent is skipped with a message; with
# neither, the test is skipped.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
source "$(dirname "$0")/torchrun_lib.sh"
[ ${#TORCHRUN_OLD[@]} -gt 0 ] || echo "SKIP (part): $old_torchrun_note"
[ ${#TORCHRUN_NEW[@]} -gt 0 ] || echo "SKIP (part): $new_torchrun_note"
[ ${#TORCHRUN_OLD[@]} -gt 0 ] || [ ${#TORCHRUN_NEW[@]} -gt 0 ] || { echo "SKIP: no torchrun"; exit 77; }

make_text data.txt 100000
tiny_config job.toml data.txt
ARGS=(--parallel.data=allreduce --parallel.transport=tcp --parallel.all_reduce=ring --parallel.timeout_s=30)
"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/ref" > ref.log 2>&1 ||
  { cat ref.log; fail "reference run under meshtrain launch"; }
REF="$(params_file "$WORK/ref/checkpoints/step_00000020")"

# torchrun_job NAME GENERATION TORCHRUN-COMMAND...: runs the job under it and
# checks the store it met (PyTorch TCPStore of GENERATION) and the result.
torchrun_job() {
  local name="$1" generation="$2"; shift 2
  timeout 300 "$@" --no_python "$MESHTRAIN" train job.toml "${ARGS[@]}" --training.out_dir="$WORK/$name" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name: torchrun failed"; }
  grep -q "rendezvous through torchrun's agent store .*(PyTorch TCPStore, $generation)" "$name.log" ||
    { cat "$name.log"; fail "$name: did not meet at the agent's store ($generation)"; }
  grep -q "2 workers, all-reduce ring over tcp" "$name.log" || { cat "$name.log"; fail "$name: not 2 workers over tcp"; }
  cmp "$REF" "$(params_file "$WORK/$name/checkpoints/step_00000020")" ||
    fail "$name: final parameters differ from meshtrain launch's"
  echo "$name: bitwise equal to meshtrain launch"
}

if [ ${#TORCHRUN_OLD[@]} -gt 0 ]; then
  torchrun_job torch113-static "before 2.2" "${TORCHRUN_OLD[@]}" --nproc_per_node=2 --nnodes=1 --master_port="$(free_port)"
fi
if [ ${#TORCHRUN_NEW[@]} -gt 0 ]; then
  torchrun_job current-c10d "2.2 or later" "${TORCHRUN_NEW[@]}" --nproc_per_node=2 --nnodes=1 --rdzv_backend=c10d \
    --rdzv_endpoint="127.0.0.1:$(free_port)"
  torchrun_job current-standalone "2.2 or later" "${TORCHRUN_NEW[@]}" --standalone --nproc_per_node=2
fi
echo "launcher torchrun ok"
