# Pipeline parallelism trains the same numbers as one process on the same
# global batch: every schedule (gpipe, 1f1b, interleaved with 2 chunks per
# rank, zero_bubble) at 2 and 4 stages, alone and with 2 tensor ways inside
# each stage and 2 data-parallel pipelines (1F1B: each axis alone too; up
# to 8 processes): loss and
# gradient norm at every step and parameters after 20 steps within 1e-5
# (relative). A checkpoint written at 2 stages resumes at 2, at 4 (resharded
# by layer), at tp2 x pp2 and in one process, continuing as the
# uninterrupted run does; consolidate gives one process's tensors.
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
# 8 layers: 4 stages x 2 chunks each get one; 4 heads split over 2 tensor ways.
sed -i 's/^n_layer = 2/n_layer = 8/; s/^n_head = 2/n_head = 4/' job.toml
common=(--training.log_every=1 --checkpoint.every=10 --parallel.timeout_s=60 --optimizer.grad_clip=0.5)

"$MESHTRAIN" train job.toml "${common[@]}" --training.batch_size=8 --training.out_dir="$WORK/one" > one.log 2>&1 ||
  { cat one.log; fail "one process"; }

# pipe NAME PP TP DP SCHEDULE [overrides...]: pp x dp x tp workers, the
# global batch 8 as 4 micro-batches per pipeline.
pipe() {
  local name=$1 pp=$2 tp=$3 dp=$4 schedule=$5
  shift 5
  local chunks=1
  [ "$schedule" = interleaved ] && chunks=2
  "$MESHTRAIN" launch --nproc $((pp * tp * dp)) -- "$MESHTRAIN" train job.toml "${common[@]}" \
    --parallel.data=allreduce --parallel.pipeline="$pp" --parallel.tensor="$tp" --parallel.schedule="$schedule" \
    --parallel.virtual_stages="$chunks" --parallel.micro_batches=4 --training.batch_size=$((8 / dp)) \
    --training.out_dir="$WORK/$name" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
  grep -q "pipeline parallel: $pp stages, schedule $schedule, 4 micro-batches, $chunks virtual stage(s) per rank (pp=$pp x dp=$dp (ep=1) x tp=$tp" "$name.log" ||
    { cat "$name.log"; fail "$name: no pipeline line"; }
}

same() {  # REFERENCE NAME
  echo "== $2 against $1"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 || fail "$2: losses differ"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 grad_norm || fail "$2: gradient norms differ"
  compare_losses "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 val_loss || fail "$2: validation differs"
  compare_params "$(params_file "$WORK/$1/checkpoints/step_00000020")" \
                 "$(params_file "$WORK/$2/checkpoints/step_00000020")" 1e-5 || fail "$2: parameters differ"
}

# 1F1B at every layout; the other schedules at 2 and 4 stages alone and
# with both other axes at once (2 x 2 x 2): a schedule orders actions
# within a pipeline, and those three meet every axis (CI time).
for schedule in gpipe 1f1b interleaved zero_bubble; do
  layouts=("2 1 1" "4 1 1" "2 2 2")
  [ "$schedule" = 1f1b ] && layouts=("2 1 1" "4 1 1" "2 2 1" "2 1 2" "2 2 2" "4 2 1" "4 1 2")
  for layout in "${layouts[@]}"; do
    read -r pp tp dp <<< "$layout"
    name="$schedule-pp$pp-tp$tp-dp$dp"
    pipe "$name" "$pp" "$tp" "$dp" "$schedule"
    same one "$name"
  done
done
ls "$WORK/1f1b-pp2-tp1-dp1/checkpoints/step_00000020" | grep -q '^pp-00001-of-00002.shard-00000-of-00001.safetensors$' ||
  { ls "$WORK/1f1b-pp2-tp1-dp1/checkpoints/step_00000020"; fail "no file of stage 1"; }
# With ZeRO over the data axis (stage 1 over TCP; stages 2 and 3 reduce
# each backward action's gradients, wte's slice summed between the ends),
# and with uneven stages.
pipe 1f1b-zero1-tcp 2 1 2 1f1b --parallel.zero_stage=1 --parallel.transport=tcp
same one 1f1b-zero1-tcp
pipe 1f1b-zero2 2 1 2 1f1b --parallel.zero_stage=2
same one 1f1b-zero2
pipe 1f1b-zero2-tp2 2 2 2 1f1b --parallel.zero_stage=2
same one 1f1b-zero2-tp2
pipe gpipe-zero3 4 1 2 gpipe --parallel.zero_stage=3
same one gpipe-zero3
pipe 1f1b-zero3 2 1 2 1f1b --parallel.zero_stage=3
same one 1f1b-zero3
# Across GPipe's and 1F1B's micro-batches too, stage 3's prefetch follows
# the step's order (stage 0's record: worker 0's metrics).
for name in gpipe-zero3 1f1b-zero3; do
  expect_zero_overlap_report "$WORK/$name/metrics.jsonl" 3 || fail "$name: overlap report"
done
pipe 1f1b-uneven 2 1 1 1f1b --parallel.stage_layers=[5,3]
same one 1f1b-uneven

# The timeline: every rank's actions of the last step in one trace, drawn
# by `meshtrain plot`; the memory report lists each stage.
pipe traced 2 1 1 zero_bubble --trace "$WORK/trace.json" --memory-report --training.steps=6 --checkpoint.every=0
python3 - "$WORK/trace.json" <<'PY' || fail "trace"
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
kinds = {(e["pid"], e["name"]) for e in events}
for pid in (0, 1):
    for name in ("forward", "backward_input", "backward_weight"):
        assert (pid, name) in kinds, (pid, name, sorted(kinds))
assert sum(1 for e in events if e["pid"] == 1 and e["name"] == "forward") == 4, "4 micro-batches on stage 1"
PY
"$MESHTRAIN" plot "$WORK/trace.json" --out "$WORK/trace.svg" > /dev/null || fail "plot of the trace"
grep -q "bubble" "$WORK/trace.svg" || fail "the timeline does not state the bubble"
grep -q "worker 1 (stage 1, dp 0, tp 0)" traced.log || { cat traced.log; fail "no per-stage memory line"; }

# Resume the 2-stage step-10 checkpoint in other layouts.
resume() {  # NAME PP TP [overrides...]
  local name=$1 pp=$2 tp=$3
  shift 3
  mkdir -p "$WORK/$name/checkpoints"
  cp -r "$WORK/1f1b-pp2-tp1-dp1/checkpoints/step_00000010" "$WORK/$name/checkpoints/"
  "$MESHTRAIN" launch --nproc $((pp * tp)) -- "$MESHTRAIN" train job.toml "${common[@]}" --resume \
    --parallel.data=none --parallel.pipeline="$pp" --parallel.tensor="$tp" --training.batch_size=8 \
    --training.out_dir="$WORK/$name" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name"; }
  grep -q "resuming from step 10" "$name.log" || { cat "$name.log"; fail "$name did not resume"; }
  compare_params "$(params_file "$WORK/one/checkpoints/step_00000020")" \
                 "$(params_file "$WORK/$name/checkpoints/step_00000020")" 1e-5 || fail "$name: parameters differ"
}
resume resume-pp2 2 1 --parallel.micro_batches=4
resume resume-pp4 4 1 --parallel.micro_batches=4 --parallel.schedule=zero_bubble
resume resume-pp2-tp2 2 2 --parallel.micro_batches=2
resume resume-one 1 1
echo "pipeline-parallel equivalence holds"
