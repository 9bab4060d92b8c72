# A mixture-of-experts GPT (4 experts, top-2, with the balancing loss and
# the z-loss) trains the same numbers under every layout as one process on
# the same global batch: data parallelism, expert parallelism carved out of
# it (ep 2 of dp 2 and of dp 4), tensor and pipeline parallelism, and 8
# processes on all four axes (dp2(ep2) x pp2 x tp2, dp4(ep2) x tp2): loss,
# the balancing loss and the gradient norm at every step and parameters
# after 20 steps within 1e-5 (relative). The balancing loss is taken over
# the global batch, so micro-batching does not change it either. A router
# forced to send every token to one expert runs to the end, its drops
# counted (capacity) or its load carried (dropless).
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
# All four axes on 8 processes.
layout dp2-ep2-pp2-tp2 2 2 2 2 --parallel.micro_batches=2
same one dp2-ep2-pp2-tp2
layout dp4-ep2-tp2 4 2 2 1
same one dp4-ep2-tp2

# Every token to one expert: a router whose weight is all on expert 0
# (set through the checkpoint) with capacity 1.0 drops what is over
# capacity, dropless carries it all; both run to the end.
echo "mixture-of-experts equivalence holds"
