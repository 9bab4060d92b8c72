# A mixture-of-experts GPT (4 experts, top-2, with the balancing loss and
# the z-loss) trains the same numbers under every layout as one process on
# the same global batch: data parallelism, expert parallelism carved out of
# it, tensor and pipeline parallelism, and every factorisation of 8
# processes the model admits (dp8, dp4 x tp2, dp4 x pp2 with ep 1, 2, 4;
# dp2 x tp2 x pp2 with ep 1, 2); the dense GPT at dp2 x tp2 x pp2: loss, the balancing
# loss and the gradient norm at every step and parameters after 20 steps
# within 1e-5 (relative). The balancing loss covers the global batch, so
# micro-batching does not change it either.
# Resharding: a checkpoint of one (dp, tp, pp, ep, ZeRO) layout resumes in
# another, optimizer state included, and ends where the uninterrupted run
# does: ep 2 -> 1 process, 1 -> ep 2, 1 process -> 8, 8 -> 1 process,
# dp4(ep2) -> dp2 with ZeRO-2.
# A router forced to send every token to experts 0 and 1 (its weight zeroed
# in a checkpoint) runs on, the drops counted under a capacity and the load
# carried dropless, at one process and at 2 expert ranks alike. eval and
# generate read a sharded expert-parallel checkpoint; impossible layouts
# are refused by name.
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
cat >> job.toml <<'TOML'
TOML
# Experts in both blocks (moe_every 1); clipping on, so the global norm
# (experts summed over the expert ranks) decides the step.
sed -i 's/^n_head = 2/n_head = 2\nn_expert = 4\ntop_k = 2\nz_loss_coef = 1e-3/' job.toml
common=(--training.log_every=1 --checkpoint.every=10 --training.eval_every=0 --parallel.timeout_s=60
        --optimizer.grad_clip=0.5)

single() {  # NAME [overrides...]
  local name=$1
  shift
  "$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size=8 --training.out_dir="$WORK/$name" "$@" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "single process $name"; }
}

# layout NAME DP EP TP PP [overrides...]: dp x tp x pp workers, ep inside dp,
# per-worker batch 8 / dp.
layout() {
  local name=$1 dp=$2 ep=$3 tp=$4 pp=$5
  shift 5
  "$MESHTRAIN" launch --nproc $((dp * tp * pp)) -- "$MESHTRAIN" train job.toml "${common[@]}" \
    --parallel.data=allreduce --parallel.expert="$ep" --parallel.tensor="$tp" --parallel.pipeline="$pp" \
    --training.batch_size=$((8 / dp)) --training.out_dir="$WORK/$name" "$@" \
    > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
  grep -q "mixture of experts: 4 experts, top-2, .* $ep expert-parallel way(s) ($((4 / ep)) experts on this worker)" \
    "$name.log" || { cat "$name.log"; fail "$name: no mixture-of-experts line"; }
}

# same REFERENCE NAME [STEP]: losses, balancing losses, gradient norms and
# the parameters at STEP (20) agree.
same() {
  local step=${3:-20}
  echo "== $2 against $1"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 || fail "$2: losses differ"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 aux_loss || fail "$2: balancing losses differ"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 grad_norm || fail "$2: gradient norms differ"
  compare_params "$(params_file "$WORK/$1/checkpoints/step_$(printf %08d "$step")")" \
                 "$(params_file "$WORK/$2/checkpoints/step_$(printf %08d "$step")")" 1e-5 || fail "$2: parameters differ"
}

single one
# The metrics: per-layer load over the 8 x 32 tokens x 2 choices, and the losses.
python3 - "$WORK/one/metrics.jsonl" <<'PY' || fail "mixture-of-experts metrics"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
assert len(steps) == 20, len(steps)
for r in steps:
    assert r["aux_loss"] > 0 and r["z_loss"] > 0 and r["dropped_tokens"] == 0, r
    assert [l["layer"] for l in r["moe"]] == [0, 1], r["moe"]
    for l in r["moe"]:
        assert sum(l["load"]) == 8 * 32 * 2 and l["tokens"] == 8 * 32, l
print("metrics ok:", steps[-1]["moe"][0]["load"], "aux", steps[-1]["aux_loss"])
PY
layout dp2 2 1 1 1
same one dp2
layout dp2-ep2 2 2 1 1
same one dp2-ep2
# Micro-batching: the balancing loss still covers the global batch.
layout dp2-ep2-m2 2 2 1 1 --parallel.micro_batches=2
same one dp2-ep2-m2
layout dp4-ep2 4 2 1 1 --parallel.transport=tcp
same one dp4-ep2
layout tp2 1 1 2 1
same one tp2
layout pp2 1 1 1 2 --parallel.micro_batches=2
same one pp2
# All four axes on 8 processes: below, every factorisation.
layout pp2-every2 1 1 1 2 --parallel.micro_batches=2 --model.moe_every=2
single one-every2 --model.moe_every=2
same one-every2 pp2-every2

# Every factorisation of 8 processes (n_head 2, n_layer 2, 4 experts).
eight() {  # DP TP PP EP [overrides...]
  local dp=$1 tp=$2 pp=$3 ep=$4
  shift 4
  local name="w8-dp$dp-tp$tp-pp$pp-ep$ep" micro=()
  [ "$pp" -gt 1 ] && micro=(--parallel.micro_batches=2)
  layout "$name" "$dp" "$ep" "$tp" "$pp" "${micro[@]}" "$@"
  same one "$name"
}
for shape in "8 1 1 1" "8 1 1 2" "8 1 1 4" "4 2 1 1" "4 2 1 2" "4 2 1 4" "4 1 2 1" "4 1 2 2" "4 1 2 4" \
             "2 2 2 1" "2 2 2 2"; do
  # shellcheck disable=SC2086
  eight $shape
done

# The dense GPT on 8 processes.
single dense --model.n_expert=1
dense() {  # DP TP PP
  local name="dense-dp$1-tp$2-pp$3" micro=()
  [ "$3" -gt 1 ] && micro=(--parallel.micro_batches=2)
  "$MESHTRAIN" launch --nproc 8 -- "$MESHTRAIN" train job.toml "${common[@]}" --model.n_expert=1 \
    --parallel.data=allreduce --parallel.tensor="$2" --parallel.pipeline="$3" "${micro[@]}" \
    --training.batch_size=$((8 / $1)) --training.out_dir="$WORK/$name" > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name"; }
  echo "== $name against dense"
  compare_losses "$WORK/dense/metrics.jsonl" "$WORK/$name/metrics.jsonl" 1e-5 || fail "$name: losses differ"
  compare_params "$(params_file "$WORK/dense/checkpoints/step_00000020")" \
                 "$(params_file "$WORK/$name/checkpoints/step_00000020")" 1e-5 || fail "$name: parameters differ"
}
# All three axes at once; the other shapes' dense arithmetic is the MoE
# runs' above (their attention and dense tensors) and pp_equivalence's
# 8-process layouts (CI time).
dense 2 2 2

# The expert files: each expert rank's experts under their own names.
ls "$WORK/dp2-ep2/checkpoints/step_00000020" | grep -q '^ep-00001-of-00002.shard-00000-of-00001.safetensors$' ||
  { ls "$WORK/dp2-ep2/checkpoints/step_00000020"; fail "no file of expert rank 1"; }
python3 - "$(params_file "$WORK/dp2-ep2/checkpoints/step_00000020")" <<'PY' || fail "expert tensor names"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    names = set(json.loads(f.read(struct.unpack("<Q", f.read(8))[0])))
for layer in (0, 1):
    assert f"h.{layer}.mlp.router.weight" in names
    for e in range(4):
        for t in ("c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"):
            assert f"h.{layer}.mlp.experts.{e}.{t}" in names, (layer, e, t)
PY

# Resharding: resume FROM's step-10 checkpoint in another layout; the
# parameters at step 20 are the uninterrupted run's.
reshard() {  # FROM NAME DP EP TP PP [overrides...]
  local from=$1 name=$2 dp=$3 ep=$4 tp=$5 pp=$6
  shift 6
  mkdir -p "$WORK/$name/checkpoints"
  cp -r "$WORK/$from/checkpoints/step_00000010" "$WORK/$name/checkpoints/"
  if [ $((dp * tp * pp)) = 1 ]; then
    "$MESHTRAIN" train job.toml "${common[@]}" --resume --training.batch_size=8 --training.out_dir="$WORK/$name" "$@" \
      > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
  else
    "$MESHTRAIN" launch --nproc $((dp * tp * pp)) -- "$MESHTRAIN" train job.toml "${common[@]}" --resume \
      --parallel.data=allreduce --parallel.expert="$ep" --parallel.tensor="$tp" --parallel.pipeline="$pp" \
      --training.batch_size=$((8 / dp)) --training.out_dir="$WORK/$name" "$@" > "$name.log" 2>&1 ||
      { cat "$name.log"; fail "$name"; }
  fi
  grep -q "resuming from step 10" "$name.log" || { cat "$name.log"; fail "$name did not resume"; }
  echo "== $name (from $from) against one"
  compare_params "$(params_file "$WORK/one/checkpoints/step_00000020")" \
                 "$(params_file "$WORK/$name/checkpoints/step_00000020")" 1e-5 || fail "$name: parameters differ"
}
reshard dp2-ep2 reshard-ep2-to-one 1 1 1 1
reshard one reshard-one-to-ep2 2 2 1 1
reshard one reshard-one-to-8 2 2 2 2 --parallel.micro_batches=2
reshard w8-dp2-tp2-pp2-ep2 reshard-8-to-one 1 1 1 1
reshard dp4-ep2 reshard-ep2-to-zero2 2 1 1 1 --parallel.zero_stage=2

# A forced imbalance: the routers' weights zeroed in one's step-10
# checkpoint, so every token's scores tie and it goes to experts 0 and 1
# (ties to the lower id), all on expert rank 0 under 2 expert ranks.
forced() {  # NAME NPROC CAPACITY
  local name=$1 nproc=$2 capacity=$3
  mkdir -p "$WORK/$name/checkpoints"
  cp -r "$WORK/one/checkpoints/step_00000010" "$WORK/$name/checkpoints/"
  python3 - "$WORK/$name/checkpoints/step_00000010" <<'PY' || fail "zeroing the routers"
import json, os, struct, sys, zlib
d = sys.argv[1]
path = os.path.join(d, "model.safetensors")
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
for name, t in header.items():
    if name.endswith("mlp.router.weight"):
        a, b = t["data_offsets"]
        data[8 + n + a:8 + n + b] = bytes(b - a)
open(path, "wb").write(data)
manifest = json.load(open(os.path.join(d, "MANIFEST.json")))
for f in manifest["files"]:
    if f["name"] == "model.safetensors":
        f["bytes"], f["crc32"] = len(data), "%08x" % zlib.crc32(data)
json.dump(manifest, open(os.path.join(d, "MANIFEST.json"), "w"))
PY
  local launch=()
  [ "$nproc" -gt 1 ] && launch=("$MESHTRAIN" launch --nproc "$nproc" --)
  "${launch[@]}" "$MESHTRAIN" train job.toml "${common[@]}" --resume --parallel.data=allreduce \
    --parallel.expert="$nproc" --training.batch_size=$((8 / nproc)) --model.capacity_factor="$capacity" \
    --training.out_dir="$WORK/$name" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
  grep -q "resuming from step 10" "$name.log" || { cat "$name.log"; fail "$name did not resume"; }
}
forced forced-capacity 1 1.0
forced forced-capacity-ep2 2 1.0
forced forced-dropless 1 0
forced forced-dropless-ep2 2 0
python3 - "$WORK" <<'PY' || fail "forced imbalance"
import json, sys
def first(name):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/metrics.jsonl") if '"loss"' in l]
    assert rows[0]["step"] == 11 and rows[-1]["step"] == 20, name
    return rows[0]
# Capacity 1.0: ceil(1.0 x 32 x 2 / 4) = 16 tokens per expert per sequence;
# 32 of each sequence go to experts 0 and 1: 16 dropped from each, in each
# of the 8 sequences and 2 layers.
for name in ("forced-capacity", "forced-capacity-ep2"):
    r = first(name)
    assert r["dropped_tokens"] == 2 * 8 * 2 * 16, (name, r["dropped_tokens"])
    assert all(l["load"] == [256, 256, 0, 0] for l in r["moe"]), (name, r["moe"])
for name in ("forced-dropless", "forced-dropless-ep2"):
    r = first(name)
    assert r["dropped_tokens"] == 0 and all(l["load"] == [256, 256, 0, 0] for l in r["moe"]), (name, r)
print("forced imbalance: drops counted, load carried")
PY
same forced-capacity forced-capacity-ep2
same forced-dropless forced-dropless-ep2

# eval and generate on the expert-parallel checkpoint (resharded into the
# whole model), the same as on one process's.
"$MESHTRAIN" eval "$WORK/dp2-ep2/checkpoints" --batches 2 --json --training.batch_size=8 > eval-ep2.json || fail "eval of dp2-ep2"
"$MESHTRAIN" eval "$WORK/one/checkpoints" --batches 2 --json > eval-one.json || fail "eval of one"
python3 - eval-one.json eval-ep2.json <<'PY' || fail "eval of the expert-parallel checkpoint"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert abs(a["val_loss"] - b["val_loss"]) <= 1e-5 * abs(a["val_loss"]), (a, b)
PY
"$MESHTRAIN" generate "$WORK/dp2-ep2/checkpoints" --prompt "And the" --tokens 30 --temperature 0 > gen-ep2.txt ||
  fail "generate from dp2-ep2"
"$MESHTRAIN" generate "$WORK/one/checkpoints" --prompt "And the" --tokens 30 --temperature 0 > gen-one.txt
cmp gen-one.txt gen-ep2.txt || fail "greedy generation differs between the layouts"

# Impossible layouts, refused by name before anything runs.
refused() {  # NPROC WHAT [overrides...]
  local nproc=$1 what=$2
  shift 2
  if "$MESHTRAIN" launch --nproc "$nproc" -- "$MESHTRAIN" train job.toml "${common[@]}" --parallel.data=allreduce \
      --training.out_dir="$WORK/refused" "$@" > refused.log 2>&1; then
    cat refused.log; fail "accepted: $*"
  fi
  grep -q "$what" refused.log || { cat refused.log; fail "no '$what' in the error for: $*"; }
}
refused 2 "do not split over 3 expert-parallel ways" --parallel.expert=3
# Under a launcher the world decides the data ways: the device mesh refuses it.
refused 2 "ep=4 does not divide dp=2" --parallel.expert=4 --model.n_expert=8 --parallel.workers=2
refused 2 "use zero_stage = 0 with expert > 1" --parallel.expert=2 --parallel.zero_stage=1
refused 2 "turn sequence parallelism off" --parallel.tensor=2 --parallel.sequence_parallel=true
refused 2 "experts per token, but model.n_expert = 4" --model.top_k=5
refused 2 "choose another parallel.all_reduce" --parallel.expert=2 --parallel.all_reduce=reduction_server
refused 2 "ZeRO's sharded update does not reach" --model.expert_bias_rate=0.001 --parallel.zero_stage=1
echo "mixture-of-experts equivalence holds"
