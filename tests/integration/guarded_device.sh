# training.device = "cpu-guarded": the CPU's kernels on memory that faults on
# any host access outside a kernel (kernels/guarded_backend.hpp), the rules
# of a GPU's memory on a machine without one. Every model and mode trains to
# the same bits as on "cpu": parameters, AdamW's moments and the losses; a
# checkpoint moves between the two devices and the run goes on bit for bit;
# data-, tensor- and pipeline-parallel workers stage their collectives
# through host memory to the CPU's bits, with every optimizer; what cannot
# run there is refused with status 3.
source "$(dirname "$0")/lib.sh"
make_text text.txt 100000
tiny_config job.toml "$WORK/text.txt"

# The tensors of two checkpoints' files, byte for byte (their metadata names
# the device, so whole files differ).
same_tensors() {
  python3 - "$1" "$2" <<'PY' || fail "$1 and $2 hold different tensors"
import json, struct, sys
def tensors(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n]); header.pop("__metadata__", None)
    return {k: raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]] for k, t in header.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys(), "tensor names differ"
bad = [k for k in a if a[k] != b[k]]
assert not bad, f"{len(bad)} tensors differ, first {bad[0]}"
PY
}
same_run() {  # same_run A B STEP: parameters, optimizer state and losses of out dirs A and B
  local a="$WORK/$1/checkpoints/step_$(printf %08d "$3")" b="$WORK/$2/checkpoints/step_$(printf %08d "$3")"
  same_tensors "$a/model.safetensors" "$b/model.safetensors"
  same_tensors "$a/train_state.safetensors" "$b/train_state.safetensors"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 0 > /dev/null || fail "$1 and $2: losses differ"
}
train() {  # train NAME CONFIG DEVICE ARGS...
  local name=$1 config=$2 device=$3; shift 3
  "$MESHTRAIN" train "$config" --training.device="$device" --training.out_dir="$WORK/$name" "$@" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
}

# GPT in fp32 and bf16, every recomputation mode, micro-batches with clipping, every optimizer
# (SGD with Nesterov momentum, LARS, LAMB besides AdamW); a mixture of experts
# (its rows gathered, exchanged and combined on the device, its routing's bookkeeping on the host:
# moe_mlp.hpp) with
# the balancing and z losses, or with the expert bias and a capacity.
moe="--model.n_expert=4 --model.top_k=2"
modes=("fp32:--training.precision=fp32"
       "bf16:--training.precision=bf16"
       "bf16-selective:--training.precision=bf16 --training.recompute=selective"
       "fp32-full:--training.recompute=full"
       "micro-clip:--parallel.micro_batches=2 --optimizer.grad_clip=0.5"
       "moe-fp32:$moe --model.aux_loss_coef=0.01 --model.z_loss_coef=1e-3 --training.precision=fp32 --optimizer.grad_clip=0.5"
       "moe-bf16-bias:$moe --model.expert_bias_rate=1e-3 --model.capacity_factor=1 --training.precision=bf16"
       "sgd-nesterov:--optimizer.name=sgd --optimizer.lr=0.05 --optimizer.momentum=0.9 --optimizer.nesterov=true"
       "lars:--optimizer.name=lars --optimizer.lr=0.5 --optimizer.momentum=0.9 --optimizer.grad_clip=0.5"
       "lamb:--optimizer.name=lamb --optimizer.lr=0.01")
for mode in "${modes[@]}"; do
  name=${mode%%:*}; read -r -a args <<< "${mode#*:}"
  train "cpu-$name" job.toml cpu --training.steps=10 "${args[@]}"
  train "guarded-$name" job.toml cpu-guarded --training.steps=10 "${args[@]}"
  grep -q "device cpu-guarded" "guarded-$name.log" || { cat "guarded-$name.log"; fail "not on cpu-guarded"; }
  same_run "cpu-$name" "guarded-$name" 10
  echo "gpt $name: the same bits on cpu-guarded"
done

# The host waits for the device only where a step needs a value (docs/gpu.md): per micro-batch the
# loss's rows with its hits (one download), per step the gradient norm. More would be a new
# synchronisation.
host_syncs() {  # host_syncs RUN WANT: every step record of RUN carries host_syncs = WANT
  python3 - "$WORK/$1/metrics.jsonl" "$2" <<'PY' || fail "$1: host_syncs per step"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step_ms"' in l]
got = sorted({r.get("host_syncs") for r in steps}, key=str)
assert steps and got == [int(sys.argv[2])], f"host_syncs per step {got}, want {sys.argv[2]}"
PY
}
host_syncs guarded-fp32 2
host_syncs guarded-bf16 2
host_syncs guarded-micro-clip 3  # 2 micro-batches
host_syncs guarded-sgd-nesterov 2
host_syncs guarded-lars 3  # the per-view norms of LARS and LAMB
host_syncs guarded-lamb 3
grep -q host_syncs "$WORK/cpu-fp32/metrics.jsonl" && fail "the CPU counts host syncs"
echo "host syncs: 2 a step (the loss with its hits, the gradient norm), 1 more a micro-batch, 1 more for LARS's and LAMB's norms"

# The memory report and the step records count the job's device: on cpu-guarded the model,
# gradients and AdamW state live in its memory, by kind as the CPU's host memory holds them, and
# the host's own total is reported beside them.
for dev in cpu cpu-guarded; do
  train "mem-$dev" job.toml "$dev" --training.steps=6 --memory-report
done
python3 - mem-cpu.log mem-cpu-guarded.log "$WORK/mem-cpu-guarded/metrics.jsonl" <<'PY' || fail "memory report by device"
import json, re, sys
def rows(path):
    return {m[1]: float(m[2]) for m in re.finditer(r"^  (\w+) +([0-9.]+) MiB", open(path).read(), re.M)}
cpu, dev = rows(sys.argv[1]), rows(sys.argv[2])
for kind in ("parameters", "gradients", "optimizer_state"):
    assert dev[kind] > 0 and dev[kind] == cpu[kind], f"{kind}: cpu {cpu.get(kind)} MiB, cpu-guarded {dev.get(kind)}"
assert "on cpu-guarded" in open(sys.argv[2]).read() and "host" in dev and "host" not in cpu, "the report's device"
peaks = [r for r in map(json.loads, open(sys.argv[3])) if r.get("memory") == "peak"][-1]
assert abs(peaks["peak_parameters_mb"] - dev["parameters"]) < 0.01 and "peak_host_total_mb" in peaks, peaks
print(f"memory by device: parameters {dev['parameters']} MiB on cpu-guarded as on cpu, host {dev['host']} MiB")
PY

# The image models (generated images are enough: the bits are the point).
for model in mlp vit; do
  args=(--training.steps=6 --training.eval_every=0 --schedule.warmup_steps=2 --training.threads=1
        --checkpoint.every=6 --optimizer.name=adamw)
  train "cpu-$model" "$SRC/examples/fashion-$model.toml" cpu "${args[@]}"
  train "guarded-$model" "$SRC/examples/fashion-$model.toml" cpu-guarded "${args[@]}"
  same_run "cpu-$model" "guarded-$model" 6
  echo "$model: the same bits on cpu-guarded"
done

# A checkpoint moves between the devices: 10 steps on one, 10 on the other,
# equal to 20 on the CPU.
train cpu-20 job.toml cpu
for pair in "cpu-guarded cpu" "cpu cpu-guarded"; do
  read -r first second <<< "$pair"
  name="from-$first"
  train "$name" job.toml "$first" --stop-at-step 10
  "$MESHTRAIN" train job.toml --resume --training.device="$second" --training.out_dir="$WORK/$name" \
    > "$name-resumed.log" 2>&1 || { cat "$name-resumed.log"; fail "resume on $second"; }
  grep -q "resuming from step 10" "$name-resumed.log" || { cat "$name-resumed.log"; fail "did not resume"; }
  same_tensors "$WORK/cpu-20/checkpoints/step_00000020/model.safetensors" \
    "$WORK/$name/checkpoints/step_00000020/model.safetensors"
  echo "checkpoint of $first resumed on $second: the same bits as 20 steps on the CPU"
done

# eval and generate build a checkpoint's model on the CPU, wherever it trained, or on the device an
# override names (eval --training.device=..., generate --device ...): the same loss, the same text.
ckpt="$WORK/cpu-20/checkpoints"
for dev in cpu cpu-guarded; do
  "$MESHTRAIN" eval "$ckpt" --json --training.device="$dev" > "eval-$dev.json" 2> "eval-$dev.log" ||
    { cat "eval-$dev.log"; fail "eval on $dev"; }
  "$MESHTRAIN" generate "$ckpt" --prompt "And God said" --tokens 40 --seed 5 --device "$dev" > "generate-$dev.txt" \
    2> "generate-$dev.log" || { cat "generate-$dev.log"; fail "generate on $dev"; }
done
python3 - eval-cpu.json eval-cpu-guarded.json <<'PY' || fail "eval on cpu-guarded"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["val_loss"] == b["val_loss"] and a["val_accuracy"] == b["val_accuracy"], (a, b)
PY
cmp generate-cpu.txt generate-cpu-guarded.txt || fail "generate: other text on cpu-guarded"
[ "$(wc -c < generate-cpu.txt)" -gt 40 ] || fail "generate wrote too little: $(cat generate-cpu.txt)"
"$MESHTRAIN" train job.toml --training.device=cpu-guarded --training.steps=2 --schedule.warmup_steps=0 --checkpoint.every=2 \
  --training.out_dir="$WORK/trained-guarded" > trained-guarded.log 2>&1 || { cat trained-guarded.log; fail "train"; }
"$MESHTRAIN" eval "$WORK/trained-guarded/checkpoints" --json > eval-default.json 2>&1 ||
  { cat eval-default.json; fail "eval of a checkpoint trained on cpu-guarded, by default on the CPU"; }
echo "eval and generate: the CPU's loss and text on cpu-guarded; a device's checkpoint evaluates on the CPU"

# Several workers on the device, their collectives staged through host memory: data parallelism's
# buckets (gradient_sync.hpp), tensor parallelism's activations (device_tensor_group.hpp) and
# the pipeline's sends, receives and tied-embedding sum (executor.hpp, micro_batches.cpp),
# ZeRO-1's parameter all-gather after the sharded update, ZeRO-2's gradient reduce-scatters and
# ZeRO-3's unit gathers (grad_reducer.hpp, param_gatherer.hpp: shards and staging on the device) are
# downloaded, exchanged or reduced by the host's collectives and put back: the CPU's sums in the
# CPU's order, so its bits (fp32, bf16, bf16 on the wire, micro-batches, sequence parallelism with
# full recomputation, ZeRO 1-3 with micro-batches and evaluation, LAMB over ZeRO-2 shards, LARS over tensor shards, 1F1B with evaluation, zero-bubble, data x tensor, pipeline x tensor); one
# more wait a step per bucket. A checkpoint of two data workers on the device resumes on the CPU.
mesh_run() {  # mesh_run NAME DEVICE WORKERS ARGS... (REDUCERS=R: R Reduction Server processes too)
  local name=$1 device=$2 workers=$3; shift 3
  "$MESHTRAIN" launch --nproc "$workers" --reducers "${REDUCERS:-0}" -- "$MESHTRAIN" train job.toml --parallel.workers="$workers" \
    --parallel.timeout_s=60 --training.device="$device" --training.batch_size=4 --training.steps=8 \
    --checkpoint.every=4 --training.out_dir="$WORK/$name" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
}
mesh_same() {  # mesh_same A B STEP: every rank's checkpoint files, tensor for tensor
  local f
  for f in "$WORK/$1/checkpoints/step_$(printf %08d "$3")"/*.safetensors; do
    same_tensors "$f" "$WORK/$2/checkpoints/step_$(printf %08d "$3")/$(basename "$f")"
  done
}
dp=--parallel.data=allreduce
for mode in "dp-fp32:2:$dp --training.precision=fp32" "dp-bf16:2:$dp --training.precision=bf16" \
            "dp-wire:2:$dp --training.precision=bf16 --parallel.reduce_dtype=bf16" \
            "dp-micro:2:$dp --parallel.micro_batches=2" "tp-fp32:2:--parallel.tensor=2 --training.precision=fp32" \
            "zero1-wire:2:$dp --parallel.zero_stage=1 --training.precision=bf16 --parallel.reduce_dtype=bf16" \
            "zero2-micro:2:$dp --parallel.zero_stage=2 --training.precision=fp32 --parallel.micro_batches=2" \
            "zero2-lamb:2:$dp --parallel.zero_stage=2 --optimizer.name=lamb --optimizer.lr=0.01" \
            "tp-lars:2:--parallel.tensor=2 --optimizer.name=lars --optimizer.lr=0.5 --optimizer.momentum=0.9" \
            "zero3-wire:2:$dp --parallel.zero_stage=3 --training.precision=bf16 --parallel.reduce_dtype=bf16 --training.eval_every=4" \
            "tp-sp-full:2:--parallel.tensor=2 --parallel.sequence_parallel=true --training.recompute=full" \
            "dp-tp-wire:4:$dp --parallel.tensor=2 --parallel.reduce_dtype=bf16" \
            "pp-1f1b:2:--parallel.pipeline=2 --parallel.micro_batches=4 --training.eval_every=4" \
            "pp-zb-wire:2:--parallel.pipeline=2 --parallel.micro_batches=4 --parallel.schedule=zero_bubble --training.precision=bf16 --parallel.reduce_dtype=bf16" \
            "pp-tp-sp:4:--parallel.pipeline=2 --parallel.tensor=2 --parallel.sequence_parallel=true --parallel.micro_batches=2" \
            "ep2-wire:2:$dp --parallel.expert=2 $moe --model.aux_loss_coef=0.01 --parallel.reduce_dtype=bf16" \
            "ep2-tp:4:$dp --parallel.expert=2 --parallel.tensor=2 $moe --model.expert_bias_rate=1e-3"; do
  IFS=: read -r name workers rest <<< "$mode"; read -r -a args <<< "$rest"
  mesh_run "$name-cpu" cpu "$workers" "${args[@]}"
  mesh_run "$name-guarded" cpu-guarded "$workers" "${args[@]}"
  mesh_same "$name-cpu" "$name-guarded" 8
  compare_losses "$WORK/$name-cpu/metrics.jsonl" "$WORK/$name-guarded/metrics.jsonl" 0 > /dev/null ||
    fail "$name: losses differ"
  echo "$name: $workers workers on cpu-guarded, the same bits as on the CPU"
done
host_syncs dp-fp32-guarded 3  # the loss, the norm, the one bucket of this model
grep -q "device collectives: host-staged (the workers are not on GPUs)" dp-fp32-guarded.log ||
  { cat dp-fp32-guarded.log; fail "the log does not say what carries the device collectives"; }
mesh_run dp-resumed cpu-guarded 2 $dp --training.precision=fp32 --stop-at-step 4
mesh_run dp-resumed cpu 2 $dp --training.precision=fp32 --resume
grep -q "resuming from step 4" dp-resumed.log || { cat dp-resumed.log; fail "did not resume"; }
mesh_same dp-fp32-cpu dp-resumed 8
echo "two workers' checkpoint on cpu-guarded resumed on the CPU: the same bits as 8 steps on the CPU"
# The Reduction Server with workers on the device: their buckets staged through host memory to
# the CPU reducers (pool 2) and back; the replica check hashes a host copy of the parameters.
rs=(--parallel.all_reduce=reduction_server --training.check_replicas_every=2 --training.precision=fp32)
REDUCERS=2 mesh_run rs-cpu cpu 2 $dp "${rs[@]}"
REDUCERS=2 mesh_run rs-guarded cpu-guarded 2 $dp "${rs[@]}"
grep -q "all-reduce reduction_server" rs-guarded.log || { cat rs-guarded.log; fail "rs: not over the Reduction Server"; }
mesh_same rs-cpu rs-guarded 8
mesh_same dp-fp32-cpu rs-guarded 8
echo "Reduction Server: 2 workers on cpu-guarded, 2 CPU reducers, replicas checked: the bits of the CPU's ring"
status=0
MESHTRAIN_FAULT="flip_bit:rank=1:step=4" "$MESHTRAIN" run job.toml --nproc 2 $dp --training.device=cpu-guarded \
  --parallel.timeout_s=60 --training.batch_size=4 --training.steps=8 --training.check_replicas_every=2 \
  --parallel.max_restarts=0 --training.out_dir="$WORK/flipped" > flipped.log 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "step 4: silent data corruption .*worker(s) 0, 1 differ" flipped.log ||
  { cat flipped.log; fail "a bit flipped in device memory: status $status"; }
echo "a bit flipped in one worker's device memory at step 4: found by the replica check"
# A parameter-server worker on the device: its pulls uploaded, its pushes downloaded, the server on
# the CPU. One worker has no staleness, so the server's parameters are the CPU worker's bits.
for dev in cpu cpu-guarded; do
  "$MESHTRAIN" run job.toml --nproc 1 --parallel.data=parameter_server --parallel.servers=1 --parallel.timeout_s=60 \
    --training.device="$dev" --training.batch_size=4 --training.steps=8 --training.eval_every=0 \
    --training.out_dir="$WORK/ps-$dev" > "ps-$dev.log" 2>&1 || { cat "ps-$dev.log"; fail "parameter servers, worker on $dev"; }
done
same_tensors "$WORK/ps-cpu/checkpoints/step_00000008/model.safetensors" \
  "$WORK/ps-cpu-guarded/checkpoints/step_00000008/model.safetensors"
echo "parameter servers: a worker on cpu-guarded, its server on the CPU: the CPU worker's bits"
mesh_run zero3-resumed cpu 2 $dp --parallel.zero_stage=3 --training.precision=bf16 --parallel.reduce_dtype=bf16 \
  --training.eval_every=4 --stop-at-step 4
mesh_run zero3-resumed cpu-guarded 2 $dp --parallel.zero_stage=3 --training.precision=bf16 \
  --parallel.reduce_dtype=bf16 --training.eval_every=4 --resume
grep -q "resuming from step 4" zero3-resumed.log || { cat zero3-resumed.log; fail "zero-3 did not resume"; }
mesh_same zero3-wire-cpu zero3-resumed 8
echo "ZeRO-3 shards saved on the CPU resumed on cpu-guarded: the same bits as 8 steps on the CPU"

# What needs the host's memory is refused before anything is written.
refused() {  # refused PATTERN ARGS...
  local pattern=$1 status=0; shift
  "$MESHTRAIN" "$@" > refused.log 2>&1 || status=$?
  [ "$status" -eq 3 ] || { cat refused.log; fail "exit status $status, not 3: $*"; }
  grep -q -- "$pattern" refused.log || { cat refused.log; fail "no '$pattern': $*"; }
}
refused "hardware.intra_link is for workers on GPUs" plan --config job.toml --parallel.workers=2 \
  --parallel.data=allreduce --hardware.intra_link=nvlink4
echo "the guarded device refuses what it cannot run"

# Workers on devices: plan --config probes one (each has a device of its own), its tensor and
# expert stand-ins copying in the device's memory, and costs the collectives on the link assumed
# between the devices, which the report names: PCIe 4 for a device of no known family, or the one
# given; across hosts the network assumed with it.
mesh4=(--parallel.workers=4 --parallel.data=allreduce --parallel.tensor=2 --parallel.expert=2 $moe
       --training.batch_size=64)  # messages of ~100 KB, where the links' bandwidth, not latency, decides
for link in assumed nvlink4 bf16; do
  flags=(); [ "$link" = nvlink4 ] && flags=(--hardware.intra_link=nvlink4 --hardware.nodes=2)
  [ "$link" = bf16 ] && flags=(--parallel.reduce_dtype=bf16)
  "$MESHTRAIN" plan --config job.toml --training.device=cpu-guarded "${mesh4[@]}" "${flags[@]}" --json \
    > "plan-mesh-$link.json" 2> "plan-mesh-$link.log" || { cat "plan-mesh-$link.log"; fail "plan --config: $link"; }
done
python3 - plan-mesh-assumed.json plan-mesh-nvlink4.json plan-mesh-bf16.json <<'PY' || fail "plan --config of workers on a device"
import json, sys
pcie, nvlink, bf16 = (json.load(open(p)) for p in sys.argv[1:4])
# bf16 on the wire: the activations' all-reduces and all-to-alls at half the bytes (the tensor axis's
# loss statistics stay fp32, so a little over half), the gradients' at half.
for axis in ("tensor", "expert"):
    fp, half = pcie[f"{axis}_comm_bytes_per_step"], bf16[f"{axis}_comm_bytes_per_step"]
    assert 0.5 * fp <= half < 0.52 * fp, (axis, fp, half)
assert bf16["comm_bytes_per_step"] == pcie["comm_bytes_per_step"] / 2, (pcie, bf16)
assert pcie["interconnect"].startswith("pcie4 (31.5 GB/s") and "no profile" in pcie["interconnect"], pcie
assert nvlink["interconnect"].startswith("nvlink4 (450.0 GB/s") and "as given" in nvlink["interconnect"], nvlink
assert "ethernet-100g" in nvlink["interconnect"] and nvlink["hosts"] == 2, nvlink
for f in (pcie, nvlink):
    assert f["workers"] == 4 and f["tensor_parallel"] == 2 and f["expert_parallel"] == 2, f
    assert f["step_s"]["forward_backward"] > 0 and f["step_s"]["forward_backward_alone"] == f["step_s"]["forward_backward"]
# Inside the tensor groups (one host) NVLink's 450 GB/s beats PCIe's 31.5.
assert 0 < nvlink["step_s"]["tensor_communication"] < pcie["step_s"]["tensor_communication"], (nvlink, pcie)
print(f"plan --config, 4 workers on cpu-guarded: tensor all-reduce {pcie['step_s']['tensor_communication'] * 1e3:.3f}"
      f" ms on PCIe 4, {nvlink['step_s']['tensor_communication'] * 1e3:.3f} ms on NVLink 4")
PY

# A pipeline on devices: each stage probed alone on the device (the values a neighbour sends
# uploaded into its buffers), its memory the CPU forecast's but for the micro-batch's tokens, which
# the device holds beside its activations, the sends costed on the assumed link.
for dev in cpu cpu-guarded; do
  "$MESHTRAIN" plan --config job.toml --training.device="$dev" --parallel.workers=2 --parallel.pipeline=2 \
    --parallel.micro_batches=4 --json > "plan-pp-$dev.json" 2> "plan-pp-$dev.log" ||
    { cat "plan-pp-$dev.log"; fail "plan --config: a pipeline on $dev"; }
done
python3 - plan-pp-cpu.json plan-pp-cpu-guarded.json <<'PY' || fail "plan --config of a pipeline on a device"
import json, sys
cpu, dev = (json.load(open(p)) for p in sys.argv[1:3])
assert dev["pipeline_parallel"] == 2 and len(dev["stages"]) == len(cpu["stages"]) == 2, dev
assert dev["interconnect"].startswith("pcie4 (31.5 GB/s"), dev["interconnect"]
for c, d in zip(cpu["stages"], dev["stages"]):
    assert (c["parameters"], c["model_state_bytes"], c["slots"]) == (d["parameters"], d["model_state_bytes"], d["slots"]), (c, d)
    assert c["activations_bytes"] < d["activations_bytes"] <= c["activations_bytes"] + cpu["memory_bytes"]["data"], (c, d)
    assert d["forward_s"] > 0 and d["backward_s"] > 0, d
assert dev["memory_bytes"]["data"] == 0, dev["memory_bytes"]
step = dev["step_s"]
assert step["forward_backward"] == step["forward_backward_alone"] > 0 and step["pipeline_communication"] > 0, step
print(f"plan --config, a 2-stage pipeline on cpu-guarded: stages' activations {[d['activations_bytes'] for d in dev['stages']]}"
      f" bytes (the CPU's {[c['activations_bytes'] for c in cpu['stages']]} and the tokens)")
PY

# Data parallelism's collectives in a forecast: on devices they run on a stream of their own, the
# buckets behind the backward still to come and ZeRO-3's prefetched gathers behind the block
# before (a pipeline's: its largest stage's behind the rank's last backward), so part of them
# hides; on the CPU, where every core computes, none does. ZeRO-3 gathers and reduce-scatters the
# blocks again for each micro-batch. bf16 on the wire halves the gradients' bytes.
dp_plan=(--parallel.data=allreduce --parallel.bucket_mb=0.02)  # ~7 buckets of this model
for dev in cpu cpu-guarded; do
  for setting in "z0:2:0:1:1:fp32" "z0-bf16:2:0:1:1:bf16" "z3:2:3:1:1:fp32" "z3-micro:2:3:2:1:fp32" "pp:4:0:2:2:fp32"; do
    IFS=: read -r name workers stage mb pp wire <<< "$setting"  # name:workers:stage:micro-batches:pipeline:wire
    "$MESHTRAIN" plan --config job.toml --training.device="$dev" "${dp_plan[@]}" --parallel.workers="$workers" \
      --parallel.zero_stage="$stage" --parallel.micro_batches="$mb" --parallel.pipeline="$pp" \
      --parallel.reduce_dtype="$wire" --json \
      > "plan-dp-$dev-$name.json" 2> plan-dp.log || { cat plan-dp.log; fail "plan --config: $name on $dev"; }
  done
done
python3 - <<'PY' || fail "plan --config: the hidden part of data parallelism's collectives"
import json
plan = {(d, n): json.load(open(f"plan-dp-{d}-{n}.json"))
        for d in ("cpu", "cpu-guarded") for n in ("z0", "z0-bf16", "z3", "z3-micro", "pp")}
for (dev, name), f in plan.items():
    s = f["step_s"]
    parts = s["forward_backward"] + s["update"] + s["communication"] - s["communication_hidden"] + s["pipeline_communication"]
    assert abs(s["total"] - parts) < 1e-9, s
    if dev == "cpu":
        assert s["communication_hidden"] == 0 and s["communication"] > 0, (dev, name, s)
    else:
        assert 0 < s["communication_hidden"] < s["communication"], (dev, name, s)
for dev in ("cpu", "cpu-guarded"):
    one, two = plan[(dev, "z3")]["comm_bytes_per_step"], plan[(dev, "z3-micro")]["comm_bytes_per_step"]
    assert two > 1.5 * one, (dev, one, two)
    fp32, bf16 = plan[(dev, "z0")], plan[(dev, "z0-bf16")]
    assert bf16["reduce_dtype"] == "bf16" and bf16["comm_bytes_per_step"] == fp32["comm_bytes_per_step"] / 2, (fp32, bf16)
g = plan[("cpu-guarded", "z0")]["step_s"]
print(f"plan --config, 2 workers on cpu-guarded: {g['communication_hidden'] / g['communication']:.0%} of DP's "
      f"{g['communication'] * 1e3:.3f} ms hidden; on the CPU none")
PY

# plan --config forecasts the job on its own device: the probe's model lives in the device's
# memory, its activations are counted there, and its times wait for the device.
for dev in cpu cpu-guarded; do
  "$MESHTRAIN" plan --config job.toml --training.device="$dev" --training.precision=bf16 --json \
    > "plan-$dev.json" 2> "plan-$dev.log" || { cat "plan-$dev.log"; fail "plan --config on $dev"; }
done
python3 - plan-cpu.json plan-cpu-guarded.json <<'PY' || fail "plan --config by device"
import json, sys
cpu, dev = (json.load(open(p)) for p in sys.argv[1:3])
assert cpu["device"] == "cpu" and dev["device"] == "cpu-guarded", (cpu["device"], dev["device"])
c, d = cpu["memory_bytes"], dev["memory_bytes"]
for kind in ("parameters", "gradients", "optimizer_state"):
    assert c[kind] > 0 and c[kind] == d[kind], (kind, c[kind], d[kind])
# On the device the batch's tokens are uploaded into its memory beside the activations: the
# host's batch buffers (data) are not the device's.
assert d["data"] == 0 and d["activations"] == c["activations"] + c["data"], (c, d)
assert dev["step_s"]["forward_backward"] > 0 and dev["step_s"]["update"] > 0, dev["step_s"]
print(f"plan --config on cpu-guarded: activations {d['activations']} bytes = the CPU's plus its batch")
PY
status=0
"$MESHTRAIN" plan --config job.toml --training.device=cuda > plan-cuda.log 2>&1 || status=$?
if [ -e /dev/nvidiactl ]; then
  echo "plan --config on cuda: a GPU is here (status $status); the GPU check covers it"
else
  [ "$status" -eq 3 ] && grep -q "no usable GPU" plan-cuda.log || { cat plan-cuda.log; fail "plan on cuda: $status"; }
  echo "plan --config --training.device=cuda without a GPU: status 3, $(head -c 120 plan-cuda.log)"
fi
