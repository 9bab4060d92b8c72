# Flash attention (training.attention = "flash", kernels/flash_attention.hpp)
# trains the numbers of the kernel that keeps the probabilities: losses,
# gradient norms and parameters after 20 steps within 1e-5 (relative) in
# fp32 and within bf16's rounding (2e-3) in bf16; under tensor and sequence
# parallelism as one flash process does (1e-5); recomputation (selective and
# full) changes no bit; and its activation peak is below the probabilities
# kernel's, within 10% of the planner's formula (core/activation_memory.hpp).
source "$(dirname "$0")/lib.sh"
make_text text.txt 100000
tiny_config job.toml "$WORK/text.txt"
# Context 100: forward's and backward's blocks (64 rows, 64 and 256 keys)
# end mid-block; 4 heads split over 2 tensor ways.
common=(--model.n_layer=2 --model.n_embd=64 --model.n_head=4 --model.block_size=100 --training.batch_size=8
        --training.log_every=1 --training.eval_every=0 --checkpoint.every=20 --optimizer.grad_clip=0.5
        --parallel.timeout_s=60)

run() {  # NAME ARGS...
  local name=$1
  shift
  "$MESHTRAIN" train job.toml "${common[@]}" --training.out_dir="$WORK/$name" "$@" > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name"; }
}
same() {  # REFERENCE NAME TOLERANCE
  echo "== $2 against $1"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "$3" || fail "$2: losses differ"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "$3" grad_norm || fail "$2: gradient norms differ"
  compare_params "$(params_file "$WORK/$1/checkpoints/step_00000020")" \
                 "$(params_file "$WORK/$2/checkpoints/step_00000020")" "$3" || fail "$2: parameters differ"
}

for p in fp32 bf16; do
  run "probs-$p" --training.precision=$p --training.attention=probabilities
  run "flash-$p" --training.precision=$p --training.attention=flash
done
grep -q "attention: flash" flash-fp32.log || { cat flash-fp32.log; fail "the setup does not name the kernel"; }
same probs-fp32 flash-fp32 1e-5
same probs-bf16 flash-bf16 2e-3

"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${common[@]}" --training.attention=flash \
  --parallel.tensor=2 --parallel.sequence_parallel=true --training.out_dir="$WORK/flash-tp2-sp" > tp.log 2>&1 ||
  { cat tp.log; fail "flash under tensor and sequence parallelism"; }
same flash-fp32 flash-tp2-sp 1e-5

for mode in selective full; do run "flash-bf16-$mode" --training.precision=bf16 --training.attention=flash \
  --training.recompute=$mode; done
for mode in selective full; do same flash-bf16 "flash-bf16-$mode" 0; done

python3 - "$WORK" <<'PY' || fail "activation peaks"
import json, sys
def peak(run):
    rec = [r for r in map(json.loads, open(f"{sys.argv[1]}/{run}/metrics.jsonl")) if r.get("memory") == "peak"][-1]
    return rec["peak_activations_mb"], rec["predicted_activations_mb"]
for p in ("fp32", "bf16"):
    (flash, want), (probs, _) = peak(f"flash-{p}"), peak(f"probs-{p}")
    print(f"{p}: activations flash {flash:.2f} MiB (formula {want:.2f}, {abs(flash - want) / flash:.1%}), "
          f"probabilities {probs:.2f} MiB")
    assert abs(flash - want) / flash <= 0.10, (p, flash, want)
    assert flash < 0.9 * probs, (p, flash, probs)
PY
echo "flash attention trains the probabilities kernel's numbers, under TP+SP and recomputation; less memory"
