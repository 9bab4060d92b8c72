# `meshtrain submit` runs a CustomJob's replicas as local processes; each
# finds its role and peers from CLUSTER_SPEC (or TF_CONFIG) alone.
source "$(dirname "$0")/lib.sh"
make_text data.txt 100000
tiny_config job.toml data.txt

# The shape of examples/custom-job.json (1 primary + 1 worker, data-parallel) on the tiny config.
pool() {  # pool REPLICAS SUBCOMMAND EXTRA_ARGS_JSON
  echo "{\"replicaCount\": $1, \"machineSpec\": {\"machineType\": \"n1-standard-4\"},
         \"containerSpec\": {\"imageUri\": \"unused\", \"command\": [\"meshtrain\", \"$2\", \"job.toml\"],
                             \"args\": [\"--parallel.data=allreduce\", \"--parallel.timeout_s=30\" ${3:-}]}}"
}
cat > dp.json <<JSON
{"displayName": "dp", "jobSpec": {"workerPoolSpecs": [$(pool 1 train), $(pool 1 train)]}}
JSON
"$MESHTRAIN" submit dp.json > dp.txt 2>&1 || { cat dp.txt; fail "data-parallel submit"; }
grep -q "^\[primary\] .*2 workers" dp.txt || { cat dp.txt; fail "the primary did not train with 2 workers"; }
[ -d "$WORK/run/checkpoints/step_00000020" ] || { cat dp.txt; fail "no final checkpoint"; }
dp_loss="$(grep -o 'final loss [0-9.]*' dp.txt)"

# All four pools: 2 workers, 1 reducer (pool 2), 1 evaluator (pool 3).
rs=", \"--parallel.all_reduce=reduction_server\", \"--training.out_dir=$WORK/all\""
cat > all.json <<JSON
{"jobSpec": {"workerPoolSpecs": [$(pool 1 train "$rs"), $(pool "\"1\"" train "$rs"),
  {"replicaCount": 1, "containerSpec": {"command": ["meshtrain", "reducer"], "args": ["--timeout", "30"]}},
  $(pool 1 evaluator "$rs")]}}
JSON
"$MESHTRAIN" submit all.json > all.txt 2>&1 || { cat all.txt; fail "submit with every pool"; }
for label in primary "server 0" "evaluator 0"; do  # a non-lead worker prints nothing
  grep -q "^\[$label\] " all.txt || { cat all.txt; fail "no [$label] output"; }
done
[ "$(wc -l < "$WORK/all/eval.jsonl")" = 2 ] || { cat all.txt; fail "the evaluator did not record both checkpoints"; }
[ "$(grep -o 'final loss [0-9.]*' all.txt)" = "$dp_loss" ] || { cat all.txt; fail "reduction server loss differs"; }

# TF_CONFIG alone is enough too (a replica started by a TensorFlow-minded launcher).
tf="bash\", \"-c\", \"unset CLUSTER_SPEC; exec \\\"$MESHTRAIN\\\" train job.toml --parallel.data=allreduce --training.out_dir=$WORK/tf"
cat > tf.json <<JSON
{"workerPoolSpecs": [{"containerSpec": {"command": ["$tf"]}}, {"replicaCount": 1, "containerSpec": {"command": ["$tf"]}}]}
JSON
"$MESHTRAIN" submit tf.json > tf.txt 2>&1 || { cat tf.txt; fail "submit through TF_CONFIG"; }
[ "$(grep -o 'final loss [0-9.]*' tf.txt)" = "$dp_loss" ] || { cat tf.txt; fail "TF_CONFIG run loss differs"; }
echo "submit ok"
