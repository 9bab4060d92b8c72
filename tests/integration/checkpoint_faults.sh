# Checkpoints under faults, for a 2-worker data-parallel job (sharded,
# asynchronous checkpoints):
#  - stopped and resumed, it ends bitwise equal to an uninterrupted run;
#  - a truncated shard and a corrupted manifest make their checkpoints
#    skipped: the resume says so and falls back to the newest complete one;
#  - a checkpoint write that fails (the file-size limit of a full disk, by
#    `ulimit -f`) stops the job with an error naming it, and the previous
#    checkpoint stays complete and loadable.
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
common=(--checkpoint.every=5 --checkpoint.keep=10 --parallel.timeout_s=60 --parallel.data=allreduce)

# job NAME [ARGS...]: 2 workers, output in $WORK/NAME
job() {
  local name=$1
  shift
  "$MESHTRAIN" launch --nproc 2 -- "$MESHTRAIN" train job.toml "${common[@]}" --training.out_dir="$WORK/$name" "$@"
}

job straight > straight.log 2>&1 || { cat straight.log; fail "straight run"; }
ls "$WORK/straight/checkpoints/step_00000020" | grep -q "^shard-00001-of-00002.safetensors$" ||
  fail "a 2-worker checkpoint is not sharded"
grep -q '"workers": 2' "$WORK/straight/checkpoints/step_00000020/MANIFEST.json" || fail "the manifest lacks the job"
straight=$(params_file "$WORK/straight/checkpoints/step_00000020")

# Stopped at 15 and resumed: the same bits.
job split --stop-at-step=15 > first.log 2>&1 || { cat first.log; fail "first half"; }
job split --resume > second.log 2>&1 || { cat second.log; fail "resumed"; }
grep -q "resuming from step 15" second.log || { cat second.log; fail "did not resume at 15"; }
cmp "$straight" "$(params_file "$WORK/split/checkpoints/step_00000020")" || fail "the resumed run ended elsewhere"

# Corruption: step 15's shard truncated, step 10's manifest garbled; the
# resume skips both, saying why, and continues from step 5 to the same bits.
job damaged --stop-at-step=15 > damaged1.log 2>&1 || { cat damaged1.log; fail "damaged first half"; }
ck="$WORK/damaged/checkpoints"
shard="$ck/step_00000015/shard-00001-of-00002.safetensors"
head -c $(( $(stat -c %s "$shard") / 2 )) "$shard" > "$shard.cut" && mv "$shard.cut" "$shard"
echo '{"format": "meshtrain-checkpoint", "vers' > "$ck/step_00000010/MANIFEST.json"
job damaged --resume > damaged2.log 2>&1 || { cat damaged2.log; fail "resume after damage"; }
grep -q "skipping checkpoint: .*step_00000015.*shard-00001-of-00002.safetensors" damaged2.log ||
  { cat damaged2.log; fail "the truncated shard was not named"; }
grep -q "skipping checkpoint: .*step_00000010.*MANIFEST.json" damaged2.log ||
  { cat damaged2.log; fail "the corrupted manifest was not named"; }
grep -q "resuming from step 5" damaged2.log || { cat damaged2.log; fail "did not fall back to step 5"; }
cmp "$straight" "$(params_file "$ck/step_00000020")" || fail "the run resumed after damage ended elsewhere"

# A write that fails: each shard is ~200 KB, the file-size limit 100 KiB
# (SIGXFSZ ignored, so the write gets EFBIG as on a full disk; over TCP,
# since the limit also caps a shared-memory segment). The job stops with an
# error naming the checkpoint; step 10's stays complete.
job full --stop-at-step=10 > full1.log 2>&1 || { cat full1.log; fail "full: first half"; }
if (trap '' XFSZ; ulimit -f 100; job full --resume --parallel.transport=tcp > full2.log 2>&1); then
  fail "a failing checkpoint write went unnoticed"
fi
grep -q "step_00000015" full2.log || { cat full2.log; fail "the error does not name the checkpoint"; }
grep -qi "too large\|no space" full2.log || { cat full2.log; fail "the error does not say why"; }
[ ! -d "$WORK/full/checkpoints/step_00000015" ] || fail "a failed checkpoint was committed"
"$MESHTRAIN" consolidate "$WORK/full/checkpoints" "$WORK/full.safetensors" > consolidate.log 2>&1 ||
  { cat consolidate.log; fail "the previous checkpoint is not loadable"; }
grep -q "step_00000010 (step 10)" consolidate.log || { cat consolidate.log; fail "the newest complete one is not step 10"; }
echo "checkpoints survive faults"
