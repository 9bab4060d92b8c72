# Shared by the launcher_*.sh tests; sourced after lib.sh.
# One data-parallel training job of 2 workers, run first by `meshtrain
# launch` as the reference: every other launcher must reach the same final
# loss, since the data order and the reduction order do not depend on who
# started the ranks.
make_text data.txt 100000
tiny_config job.toml data.txt
DP_ARGS=(--parallel.data=allreduce --parallel.timeout_s=30)

# The "final loss X" of a run's output.
final_loss() { grep -o 'final loss [0-9.]*' "$1" | head -1; }

"$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${DP_ARGS[@]}" --training.out_dir="$WORK/ref" > ref.txt 2>&1 ||
  { cat ref.txt; fail "reference run under meshtrain launch"; }
REF_LOSS="$(final_loss ref.txt)"
[ -n "$REF_LOSS" ] || { cat ref.txt; fail "reference run printed no final loss"; }
grep -q "2 workers" ref.txt || { cat ref.txt; fail "reference run is not data-parallel"; }

# Checks a launcher's run: every rank succeeded, the final checkpoint
# exists, and the loss matches the reference.
check_run() {
  local out="$1" dir="$2"
  grep -q "2 workers" "$out" || { cat "$out"; fail "not a data-parallel run of 2 workers"; }
  [ -d "$dir/checkpoints/step_00000020" ] || { cat "$out"; fail "no final checkpoint in $dir"; }
  [ "$(final_loss "$out")" = "$REF_LOSS" ] || { cat "$out"; fail "final loss '$(final_loss "$out")' != reference '$REF_LOSS'"; }
}
