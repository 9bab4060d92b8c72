# The Kubernetes examples (examples/k8s/), checked as far as this machine
# can: no cluster here, so each manifest is parsed (PyYAML) and checked for
# what meshtrain relies on, and the PyTorchJob's own command and config run
# as local processes given exactly the four variables its operator sets
# (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), one per replica. The
# TrainJob's command runs under a real torchrun given the PET_* variables of
# Kubeflow Trainer's torch-distributed runtime, where a torchrun is present.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns_lib.sh"
source "$(dirname "$0")/torchrun_lib.sh"
/usr/bin/python3 -c "import yaml" 2> /dev/null || { echo "SKIP: no PyYAML (apt-get install python3-yaml)"; exit 77; }

# Prints: the PyTorchJob's replica count, its command (one word a line), and
# writes its ConfigMap's job.toml; then the TrainJob's command.
/usr/bin/python3 - "$SRC/examples/k8s" <<'PY' > manifests.txt || fail "manifest checks"
import sys, yaml
d = sys.argv[1]
docs = list(yaml.safe_load_all(open(f"{d}/pytorchjob.yaml")))
cm = next(x for x in docs if x["kind"] == "ConfigMap")
job = next(x for x in docs if x["kind"] == "PyTorchJob")
assert job["apiVersion"] == "kubeflow.org/v1", job["apiVersion"]
specs = job["spec"]["pytorchReplicaSpecs"]
assert set(specs) == {"Master", "Worker"} and specs["Master"]["replicas"] == 1, specs.keys()
for role, s in specs.items():
    c = s["template"]["spec"]["containers"][0]
    assert c["name"] == "pytorch", f"{role}: the operator needs the container named pytorch"
    assert c["command"][:2] == ["meshtrain", "train"] and "--resume" in c["command"], c["command"]
    env = {e["name"] for e in c["env"]}
    assert "MESHTRAIN_JOB_TOKEN" in env, f"{role}: no job token"
    assert not env & {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"}, "the operator sets these"
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in s["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == cm["metadata"]["name"]
    config_path = c["command"][2]
    assert config_path.rsplit("/", 1)[0] in mounts and config_path.rsplit("/", 1)[1] in cm["data"], config_path
# The Master (rank 0, the lead worker) serves /metrics and /healthz on the
# port its command names, on every interface (the kubelet probes the pod's
# address), and its probes ask /healthz there; the Workers serve nothing.
m = specs["Master"]["template"]["spec"]["containers"][0]
flags = dict(a.split("=", 1) for a in m["command"] if a.startswith("--metrics.prometheus_"))
metrics_port = int(flags["--metrics.prometheus_port"])
assert flags.get("--metrics.prometheus_address") == "0.0.0.0", "the kubelet probes the pod's address, not loopback"
ports = {p["name"]: p["containerPort"] for p in m["ports"]}
for probe in ("startupProbe", "livenessProbe"):
    get = m[probe]["httpGet"]
    assert get["path"] == "/healthz" and ports.get(get["port"], get["port"]) == metrics_port, (probe, get)
w = specs["Worker"]["template"]["spec"]["containers"][0]
assert not {"livenessProbe", "startupProbe"} & set(w), "a Worker has a probe but serves no /healthz"
open("job.toml", "w").write(cm["data"]["job.toml"])
print(specs["Master"]["replicas"] + specs["Worker"]["replicas"])
print(" ".join(specs["Master"]["template"]["spec"]["containers"][0]["command"][1:]).replace("/config/job.toml", "job.toml"))
tj = yaml.safe_load(open(f"{d}/trainjob.yaml"))
assert tj["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and tj["kind"] == "TrainJob"
assert tj["spec"]["runtimeRef"]["name"] == "torch-distributed"
t = tj["spec"]["trainer"]
cmd = t["command"]
assert cmd[0] == "torchrun" and cmd[1] in ("--no_python", "--no-python") and cmd[2:4] == ["meshtrain", "train"], cmd
assert not any(a.startswith(("--nnodes", "--nproc", "--master", "--rdzv")) for a in cmd), "the runtime sets the layout"
assert {e["name"] for e in t["env"]} >= {"MESHTRAIN_JOB_TOKEN"}
print(t["numNodes"], t["numProcPerNode"])
print(" ".join(cmd[3:]).replace("/config/job.toml", "job.toml"))
PY
mapfile -t m < manifests.txt
replicas="${m[0]}" pytorchjob_cmd=(${m[1]}) trainjob_cmd=(${m[3]})
make_text data.txt 100000
# What the test changes: where the data is, a small model and a short run.
LOCAL=(--data.path="$WORK/data.txt" --model.n_layer=2 --model.n_embd=32 --model.block_size=32
       --training.steps=4 --schedule.warmup_steps=1 --training.threads=1 --checkpoint.every=2 --training.eval_every=0)

port="$(free_port)" metrics_port="$(free_port)"  # not the manifest's 9400: this machine may use it
while [ "$metrics_port" = "$port" ]; do metrics_port="$(free_port)"; done
pids=()
for ((rank = 0; rank < replicas; rank++)); do
  env -i PATH="$PATH" RANK=$rank WORLD_SIZE="$replicas" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    MESHTRAIN_JOB_TOKEN=test-secret timeout 120 "$MESHTRAIN" "${pytorchjob_cmd[@]}" "${LOCAL[@]}" \
    --training.out_dir="$WORK/pytorchjob" --metrics.prometheus_port="$metrics_port" > "rank$rank.log" 2>&1 &
  pids+=($!)
done
wait_ranks "the PyTorchJob's command failed" "${pids[@]}"
grep -q "$replicas workers" rank0.log || { cat rank0.log; fail "not $replicas workers"; }
grep -q "1 host, $replicas of $replicas ranks on this one" rank0.log || { cat rank0.log; fail "host not learned"; }
# Every replica ran the Master's command with its metrics port: rank 0 alone served (no clash).
grep -q "live metrics: http://0.0.0.0:$metrics_port/metrics" rank0.log || { cat rank0.log; fail "rank 0 served no metrics"; }
[ -d "$WORK/pytorchjob/checkpoints/step_00000004" ] || { cat rank0.log; fail "no final checkpoint"; }
echo "PyTorchJob: $replicas replicas trained as one job"

TORCHRUN=("${TORCHRUN_NEW[@]}")
[ ${#TORCHRUN[@]} -gt 0 ] || TORCHRUN=("${TORCHRUN_OLD[@]}")
if [ ${#TORCHRUN[@]} -eq 0 ]; then
  echo "SKIP (part): no torchrun for the TrainJob's command"
else
  PET_NNODES=1 PET_NPROC_PER_NODE=2 PET_NODE_RANK=0 PET_MASTER_ADDR=127.0.0.1 PET_MASTER_PORT="$(free_port)" \
    MESHTRAIN_JOB_TOKEN=test-secret timeout 120 "${TORCHRUN[@]}" --no_python "$MESHTRAIN" "${trainjob_cmd[@]}" \
    "${LOCAL[@]}" --parallel.transport=tcp --training.out_dir="$WORK/trainjob" > trainjob.log 2>&1 ||
    { cat trainjob.log; fail "the TrainJob's command under torchrun"; }
  grep -q "rendezvous through torchrun's agent store" trainjob.log || { cat trainjob.log; fail "TrainJob: not the agent store"; }
  [ -d "$WORK/trainjob/checkpoints/step_00000004" ] || { cat trainjob.log; fail "TrainJob: no final checkpoint"; }
  echo "TrainJob: its command trained under torchrun with the runtime's PET_* variables"
fi
echo "k8s manifests ok"
