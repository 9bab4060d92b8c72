# Specs a job cannot run fail with one clear message, quickly.
source "$(dirname "$0")/lib.sh"
make_text data.txt 50000
tiny_config job.toml data.txt
train='"containerSpec": {"command": ["meshtrain", "train", "job.toml"]}'

spec() { echo "{\"jobSpec\": {\"workerPoolSpecs\": [$1]}}" > "$2"; }
spec "{\"replicaCount\": 2, $train}" two_primaries.json
expect_failure "workerPoolSpecs\[0\] is the primary and must have replicaCount 1, got 2" "$MESHTRAIN" submit two_primaries.json
spec "{$train}, {\"replicaCount\": -1, $train}" negative.json
expect_failure "workerPoolSpecs\[1\].replicaCount must not be negative" "$MESHTRAIN" submit negative.json
spec "{$train}, {}, {\"replicaCount\": 1, \"containerSpec\": {\"command\": [\"meshtrain\", \"reducer\"]}}" no_role.json
expect_failure "1 server replicas (pool 2: parameter servers or reducers) have no role" "$MESHTRAIN" submit no_role.json
echo '{"jobSpec": ' > broken.json
expect_failure "broken.json: malformed JSON" "$MESHTRAIN" submit broken.json
expect_failure "cannot read" "$MESHTRAIN" submit missing.json

# A replica whose spec names a role meshtrain does not know.
TF_CONFIG='{"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "sidecar", "index": 0}}' \
  expect_failure "TF_CONFIG: unknown task type 'sidecar'" "$MESHTRAIN" train job.toml --parallel.data=allreduce
CLUSTER_SPEC='{"cluster": {"workerpool0": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "workerpool0"}}' \
  expect_failure "CLUSTER_SPEC: the primary pool (workerpool0) must list exactly one replica" "$MESHTRAIN" train job.toml --parallel.data=allreduce

# Peers that never show up: the primary gives up after parallel.timeout_s and the job stops.
cat > lonely.json <<JSON
{"jobSpec": {"workerPoolSpecs": [
  {"containerSpec": {"command": ["meshtrain", "train", "job.toml", "--parallel.data=allreduce", "--parallel.timeout_s=2"]}},
  {"replicaCount": 1, "containerSpec": {"command": ["sleep", "60"]}}]}}
JSON
start=$(date +%s)
expect_failure "meshtrain submit: error: primary exited with status" "$MESHTRAIN" submit lonely.json
[ $(( $(date +%s) - start )) -lt 20 ] || fail "a missing peer took $(( $(date +%s) - start )) s to be noticed"
echo "submit bad spec ok"
