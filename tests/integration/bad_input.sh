# Bad input gets one clear message, a non-zero exit, and loses nothing.
source "$(dirname "$0")/lib.sh"
make_text text.txt 100000
tiny_config job.toml "$WORK/text.txt"

printf '[model]\nn_layer = = 2\n' > malformed.toml
expect_failure "malformed.toml:2" "$MESHTRAIN" train malformed.toml
expect_failure "model.kind: unknown value 'gpt9'" "$MESHTRAIN" train job.toml --model.kind=gpt9
expect_failure "training.stepz: unknown key" "$MESHTRAIN" train job.toml --training.stepz=3
expect_failure "optimizer.lr: value -1" "$MESHTRAIN" train job.toml --optimizer.lr=-1
expect_failure "optimizer.beta1" "$MESHTRAIN" train job.toml --optimizer.beta1=1.5
expect_failure "missing.txt" "$MESHTRAIN" train job.toml --data.path="$WORK/missing.txt"
expect_failure "nonexistent.toml" "$MESHTRAIN" train "$WORK/nonexistent.toml"

# A checkpoint directory that cannot be written: error before training, nothing created.
mkdir ro && chmod 500 ro
if [ "$(id -u)" -ne 0 ]; then
  expect_failure "ro" "$MESHTRAIN" train job.toml --checkpoint.dir="$WORK/ro/ckpt"
fi
# A checkpoint "directory" that is a file.
touch notadir
expect_failure "notadir" "$MESHTRAIN" train job.toml --checkpoint.dir="$WORK/notadir"

# A good run, then a corrupt newest checkpoint: resume refuses it clearly and
# the good checkpoint is left as it was.
"$MESHTRAIN" train job.toml --training.steps=10 > good.log 2>&1 || { cat good.log; fail "good run"; }
ck="$WORK/run/checkpoints/step_00000010"
sum_before="$(sha256sum "$ck/model.safetensors")"
cp -r "$ck" "$WORK/run/checkpoints/step_00000015"
# Truncate the copy's model file: the manifest checksum no longer matches.
truncate -s 100 "$WORK/run/checkpoints/step_00000015/model.safetensors"
expect_failure "step_00000015" "$MESHTRAIN" eval "$WORK/run/checkpoints/step_00000015"
[ "$(sha256sum "$ck/model.safetensors")" = "$sum_before" ] || fail "good checkpoint changed"

# A checkpoint of another model shape is refused with the tensor named.
expect_failure "does not match the model" "$MESHTRAIN" train job.toml --model.n_embd=64 --resume --checkpoint.dir="$WORK/run/checkpoints" --training.steps=12
[ "$(sha256sum "$ck/model.safetensors")" = "$sum_before" ] || fail "good checkpoint changed"

# eval/generate of a path with no checkpoint.
mkdir empty
expect_failure "no complete checkpoint" "$MESHTRAIN" eval "$WORK/empty"
expect_failure "no complete checkpoint" "$MESHTRAIN" generate "$WORK/empty" --prompt hi
# Workers started with different settings stop at once, every one naming them
# (instead of waiting on each other's collectives until the timeout).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  timeout 60 "$MESHTRAIN" train job.toml --parallel.data=allreduce --parallel.micro_batches=2 \
  --training.out_dir="$WORK/disagree" > disagree1.log 2>&1 &
rank1=$!
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  expect_failure "parallel.micro_batches = 1 here, another value on rank 1" \
  timeout 60 "$MESHTRAIN" train job.toml --parallel.data=allreduce --training.out_dir="$WORK/disagree"
if wait "$rank1"; then fail "rank 1 trained with a different config"; fi
grep -q "parallel.micro_batches = 2 here, another value on rank 0" disagree1.log || { cat disagree1.log; fail "rank 1's message"; }

# Tensor parallelism that does not divide the model or the workers: refused
# before any rank waits for another.
expect_failure "model.n_head = 2 heads do not split over parallel.tensor = 4 ways" \
  "$MESHTRAIN" train job.toml --parallel.data=allreduce --parallel.tensor=4
expect_failure "parallel.workers = 6 is not a multiple of parallel.tensor = 4" \
  "$MESHTRAIN" train job.toml --parallel.data=allreduce --parallel.tensor=4 --model.n_head=4 --parallel.workers=6
expect_failure "model.vocab_size = 257 does not split over parallel.tensor = 3 ways" \
  "$MESHTRAIN" train job.toml --parallel.data=allreduce --parallel.tensor=3 --model.n_head=3 --model.n_embd=48 --model.vocab_size=257
expect_failure "parallel.sequence_parallel: splits the tokens over tensor ranks" \
  "$MESHTRAIN" train job.toml --parallel.sequence_parallel=true
expect_failure "parallel.reducers: 3 reducers do not split among the 2 data-parallel groups" \
  "$MESHTRAIN" train job.toml --parallel.data=allreduce --parallel.tensor=2 --parallel.all_reduce=reduction_server \
  --parallel.reducers=3
if timeout 60 "$MESHTRAIN" launch --nproc 3 -- "$MESHTRAIN" train job.toml --parallel.data=allreduce \
  --parallel.tensor=2 --training.out_dir="$WORK/tp3" > tp3.log 2>&1; then fail "3 workers ran at tensor = 2"; fi
grep -q "3 workers do not split into tensor groups of parallel.tensor = 2" tp3.log || { cat tp3.log; fail "tp3's message"; }

# Pipelines that cannot be built: stated before any training.
expect_failure "parallel.stage_layers = \[3, 3\] must list 2 layer counts" \
  "$MESHTRAIN" train job.toml --parallel.pipeline=2 --parallel.stage_layers=[3,3]
expect_failure "interleaved" \
  "$MESHTRAIN" train job.toml --parallel.pipeline=2 --parallel.virtual_stages=2
expect_failure "pipeline: stage 2 of 4 would hold no layer" \
  "$MESHTRAIN" train job.toml --parallel.pipeline=2 --parallel.schedule=interleaved --parallel.virtual_stages=2 \
  --parallel.micro_batches=2 --model.n_layer=1
expect_failure "micro-batches" \
  "$MESHTRAIN" train job.toml --parallel.pipeline=2 --parallel.schedule=interleaved --parallel.virtual_stages=1 \
  --parallel.micro_batches=3 --training.batch_size=3
expect_failure "use zero_stage = 0 or 1 with zero_bubble, or gpipe or 1f1b" \
  "$MESHTRAIN" train job.toml --parallel.pipeline=2 --parallel.data=allreduce --parallel.zero_stage=2 \
  --parallel.schedule=zero_bubble
expect_failure "use zero_stage = 0 or 1 with interleaved, or gpipe or 1f1b" \
  "$MESHTRAIN" train job.toml --parallel.pipeline=2 --parallel.data=allreduce --parallel.zero_stage=3 \
  --parallel.schedule=interleaved --parallel.virtual_stages=2 --parallel.micro_batches=2 --model.n_layer=4
expect_failure "parallel.virtual_stages: chunks pipeline stages: set parallel.pipeline > 1" \
  "$MESHTRAIN" train job.toml --parallel.virtual_stages=2
expect_failure "parallel.workers = 6 is not a multiple of pipeline 4 x tensor 1" \
  "$MESHTRAIN" train job.toml --parallel.pipeline=4 --parallel.data=allreduce --parallel.workers=6
if timeout 60 "$MESHTRAIN" launch --nproc 3 -- "$MESHTRAIN" train job.toml --parallel.pipeline=2 \
  --parallel.data=allreduce --training.out_dir="$WORK/pp3" > pp3.log 2>&1; then fail "3 workers ran at pipeline = 2"; fi
grep -q "3 workers do not split into tensor groups of parallel.tensor = 1, pipelines of parallel.pipeline = 2 stages and expert groups of parallel.expert = 1" pp3.log ||
  { cat pp3.log; fail "pp3's message"; }

# Every subcommand has --help.
for sub in train eval generate; do
  help="$("$MESHTRAIN" "$sub" --help)" || fail "$sub --help exits non-zero"
  grep -q "Usage:" <<< "$help" || fail "$sub --help prints no usage"
done
grep -q -- "--training.steps" <<< "$("$MESHTRAIN" train --help)" || fail "train --help lacks the config keys"
echo "bad input handled"
