# Token files (data.kind = "tokens"): nanoGPT's raw uint16 and llm.c's
# headed .bin written by numpy train to exactly the losses of meshtrain's own
# files of the same tokens; data.order = "sequential" takes global batch k
# from tokens [k*G*T, (k+1)*G*T] as computed in Python (one process and two
# data-parallel workers); damaged files and out-of-vocabulary ids are clear
# errors; generate encodes and decodes with the run's tokenizer.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/python_tools_lib.sh"
require_python_modules numpy
make_text text.txt 300000

"$MESHTRAIN" tokenizer-train --vocab-size 512 text.txt tok.json > /dev/null || fail "tokenizer-train"
for f in nanogpt llmc; do
  "$MESHTRAIN" tokenize --tokenizer tok.json --format $f --val-fraction 0.1 text.txt mt-$f.bin > tokenize-$f.log 2>&1 ||
    { cat tokenize-$f.log; fail "tokenize $f"; }
done
cat tokenize-llmc.log
[ -s mt-llmc_val.bin ] || fail "no validation file"

# numpy writes both formats from meshtrain's tokens, as nanoGPT's prepare.py
# and llm.c's write_datafile do; and the files the order test needs.
"$TOOLS_PYTHON" - "$WORK" <<'PY' || fail "numpy"
import sys
import numpy as np
work = sys.argv[1]
def write_llmc(path, toks):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(toks)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype=np.uint16).tobytes())
for split in ("", "_val"):
    toks = np.fromfile(f"{work}/mt-nanogpt{split}.bin", dtype=np.uint16)
    toks.astype(np.uint16).tofile(f"{work}/np-nanogpt{split}.bin")
    write_llmc(f"{work}/np-llmc{split}.bin", toks)
a = np.fromfile(f"{work}/mt-nanogpt.bin", dtype=np.uint16)
# Sequential order, T = 32 and a global batch of G = 4 windows: step k takes
# windows 4k..4k+3, tokens [128k, 128(k+1)].
T, G, steps = 32, 4, 4
rng = np.random.default_rng(5)
first, last = 2 * G * T, 3 * G * T
print(f"python: global batch 2 = windows {2 * G}..{3 * G - 1} = tokens [{first}, {last}]:", a[first:first + 8], "...")
keep = a.copy(); keep[steps * G * T + 1:] = rng.integers(0, 512, len(a) - steps * G * T - 1)
poke = a.copy(); poke[first + 1:last] = rng.integers(0, 512, last - first - 1)
keep.tofile(f"{work}/keep.bin"); poke.tofile(f"{work}/poke.bin")
# Damaged files.
llmc = open(f"{work}/np-llmc.bin", "rb").read()
open(f"{work}/truncated.bin", "wb").write(llmc[:-3])
open(f"{work}/magic.bin", "wb").write(np.int32(20240519).tobytes() + llmc[4:])
open(f"{work}/odd.bin", "wb").write(a.tobytes()[:-1])
PY
cmp np-llmc.bin mt-llmc.bin || fail "meshtrain's llm.c file differs from numpy's"
cmp np-nanogpt.bin mt-nanogpt.bin || fail "meshtrain's nanoGPT file differs from numpy's"

cat > job.toml <<TOML
[model]
kind = "gpt"
n_layer = 2
n_embd = 32
n_head = 2
block_size = 32
vocab_size = 512
[data]
kind = "tokens"
train_path = "$WORK/mt-nanogpt.bin"
order = "sequential"
tokenizer = "$WORK/tok.json"
[training]
batch_size = 4
steps = 8
log_every = 1
eval_every = 0
eval_batches = 2
threads = 1
[optimizer]
lr = 3e-3
[checkpoint]
every = 0
TOML
train() {  # NAME TRAIN_FILE [VAL_FILE] [ARGS...]
  local name=$1 train=$2 val=${3:-}
  shift 3 || shift $#
  "$MESHTRAIN" train job.toml --data.train_path="$WORK/$train" --data.val_path="${val:+$WORK/$val}" \
    --training.out_dir="$WORK/$name" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "train $name"; }
}
train mt-nanogpt mt-nanogpt.bin mt-nanogpt_val.bin
train np-nanogpt np-nanogpt.bin np-nanogpt_val.bin
train np-llmc np-llmc.bin np-llmc_val.bin
for run in np-nanogpt np-llmc; do
  for field in loss val_loss; do
    compare_losses mt-nanogpt/metrics.jsonl $run/metrics.jsonl 0 $field || fail "$run: $field differs from meshtrain's file"
  done
done

# Sequential order: the first 4 global batches read tokens [0, 512] only, and
# batch 2 exactly its own tokens.
order=(--training.steps=4 --data.val_fraction=0.1)
train seq-a mt-nanogpt.bin "" "${order[@]}"
train seq-keep keep.bin "" "${order[@]}"
train seq-poke poke.bin "" "${order[@]}"
"$TOOLS_PYTHON" - "$WORK" <<'PY' || fail "sequential order: the batches are not the tokens Python computed"
import json, sys
loss = lambda run: [r["loss"] for r in map(json.loads, open(f"{sys.argv[1]}/{run}/metrics.jsonl")) if "loss" in r]
a, keep, poke = loss("seq-a"), loss("seq-keep"), loss("seq-poke")
assert len(a) == 4 and a == keep, (a, keep)
assert poke[:2] == a[:2] and poke[2] != a[2], (a, poke)
print("sequential order: batches 0-3 are tokens [0, 512]; changing batch 2's tokens changes step 3 only:", a, poke)
PY
# Two data-parallel workers with batch 2 each read the same global batches.
dp() {
  "$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml --data.train_path="$WORK/$2" --parallel.data=allreduce \
    --training.batch_size=2 --training.out_dir="$WORK/$1" "${order[@]}" --parallel.timeout_s=60 > "$1.log" 2>&1 ||
    { cat "$1.log"; fail "$1"; }
}
dp dp-a mt-nanogpt.bin
dp dp-keep keep.bin
compare_losses seq-a/metrics.jsonl dp-a/metrics.jsonl 1e-5 || fail "2 workers: losses differ from one process"
compare_losses dp-a/metrics.jsonl dp-keep/metrics.jsonl 0 || fail "2 workers read tokens outside the first 4 global batches"

# Errors name the file and the problem; bad input exits with 3.
bad() {  # PATTERN FILE [ARGS...]
  local pattern=$1 file=$2 status=0
  shift 2
  "$MESHTRAIN" train job.toml --data.train_path="$WORK/$file" --training.out_dir="$WORK/bad" "$@" > bad.log 2>&1 || status=$?
  [ $status -eq 3 ] || { cat bad.log; fail "$file: exit status $status, not 3"; }
  grep -q -- "$pattern" bad.log || { cat bad.log; fail "$file: the message lacks '$pattern'"; }
  grep -q -- "$file" bad.log || { cat bad.log; fail "$file: the message does not name the file"; }
  echo "$file: $(grep error bad.log)"
}
bad "llm.c header says .* tokens .* (truncated?)" truncated.bin
bad "wrong magic 20240519" magic.bin
bad "odd number of bytes" odd.bin
bad "is not below model.vocab_size = 256" mt-nanogpt.bin --model.vocab_size=256
bad "does not exist" missing.bin

# generate encodes the prompt and decodes with data.tokenizer.
"$MESHTRAIN" generate mt-nanogpt/checkpoints --prompt "And the LORD" --tokens 20 --seed 3 > gen.txt || fail "generate"
[ "$(head -c 12 gen.txt)" = "And the LORD" ] || { cat gen.txt; fail "generation does not start with the prompt"; }
[ "$(wc -c < gen.txt)" -gt 30 ] || { cat gen.txt; fail "generation too short"; }
echo "generated: $(head -c 200 gen.txt)"
train no-tok mt-nanogpt.bin "" --data.tokenizer= --training.steps=1
expect_failure "without data.tokenizer" "$MESHTRAIN" generate no-tok/checkpoints --prompt "And"
"$MESHTRAIN" generate no-tok/checkpoints --prompt "And" --tokens 5 --tokenizer tok.json > /dev/null || fail "generate --tokenizer"
