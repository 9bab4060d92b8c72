# Plan to run in two commands: `meshtrain plan ... --emit-config FILE` writes
# the recommended layout as a job config, and `meshtrain run FILE` runs it.
# A fresh job from a plan's model (data parallelism on 2 small devices, in
# the plan's bf16, recomputing activations where only that fits), a job
# config re-laid out for 4 devices too small for plain data parallelism
# (ZeRO), the refusal to overwrite without --force, and no file when
# nothing fits.
source "$(dirname "$0")/lib.sh"

# The help is read whole first: grep -q stops reading at its match, and the
# help's writer would die of SIGPIPE (a failure under pipefail).
help_text="$("$MESHTRAIN" plan --help)"
grep -q -- "--emit-config" <<< "$help_text" || fail "plan --help lacks --emit-config"
grep -q -- "--force" <<< "$help_text" || fail "plan --help lacks --force"

# 1. A fresh job from the plan's model: the default data (data/kjv.txt, here
# a small file), 2 workers.
mkdir -p data
make_text data/kjv.txt 100000
tiny_plan=(--model.layers=2 --model.hidden=32 --model.heads=2 --model.seq_len=32 --model.vocab=256
           --training.global_batch=8 --hardware.device=custom --hardware.memory_gb=1 --hardware.tflops=0.1
           --hardware.devices_per_node=2)
"$MESHTRAIN" plan "${tiny_plan[@]}" --emit-config fresh.toml > plan.txt 2> emit.log \
  || { cat plan.txt emit.log; fail "plan --emit-config"; }
grep -q "recommended: dp-" plan.txt || { cat plan.txt; fail "no data-parallel recommendation"; }
grep -q "^wrote fresh.toml: dp-" emit.log || { cat emit.log; fail "no 'wrote' line"; }
grep -q "meshtrain run fresh.toml" emit.log || { cat emit.log; fail "no command to run it"; }
python3 - <<'PY' || { cat fresh.toml; fail "fresh.toml"; }
import tomllib
c = tomllib.load(open("fresh.toml", "rb"))
m, p = c["model"], c["parallel"]
assert (m["kind"], m["n_layer"], m["n_embd"], m["n_head"], m["block_size"]) == ("gpt", 2, 32, 2, 32), m
assert p["workers"] == 2 and p["data"] == "allreduce" and p["all_reduce"] in ("ring", "tree"), p
assert c["training"]["batch_size"] * p["workers"] == 8, c["training"]
assert c["data"]["path"] == "data/kjv.txt", c["data"]
assert c["training"]["precision"] == "bf16", c["training"]   # the planner's default: mixed precision
assert c["training"]["recompute"] == "none", c["training"]   # fits without recomputing
PY
grep -q "trains in fp32" emit.log && { cat emit.log; fail "the stale fp32 note"; }
"$MESHTRAIN" run fresh.toml --training.steps=3 --training.threads=1 --training.eval_batches=1 > run1.log 2>&1 \
  || { tail -n 20 run1.log; fail "meshtrain run fresh.toml"; }
grep -q "global batch 8 (2 workers)" run1.log || { tail -n 20 run1.log; fail "fresh job not on 2 workers"; }
grep -q "done: 3 steps" run1.log || { tail -n 20 run1.log; fail "fresh job did not finish"; }

# 1b. Devices of 20 MB: data parallelism fits only by recomputing activations
# (yes*), so the job recomputes; and it runs.
"$MESHTRAIN" plan --model.layers=8 --model.hidden=64 --model.heads=2 --model.seq_len=128 --model.vocab=256 \
  --training.global_batch=8 --training.micro_batch=4 --hardware.device=custom --hardware.memory_gb=0.02 \
  --hardware.tflops=0.1 --hardware.devices_per_node=2 --emit-config recompute.toml > plan3.txt 2> emit3.log \
  || { cat plan3.txt emit3.log; fail "plan --emit-config (recomputation)"; }
grep -q "recommended: dp-" plan3.txt || { cat plan3.txt; fail "no data-parallel recommendation (recomputation)"; }
grep -q "does not run yet" emit3.log && { cat emit3.log; fail "the stale recomputation note"; }
python3 - <<'PY' || { cat recompute.toml; fail "recompute.toml"; }
import tomllib
t = tomllib.load(open("recompute.toml", "rb"))["training"]
assert t["recompute"] == "full" and t["precision"] == "bf16", t
PY
"$MESHTRAIN" run recompute.toml --training.steps=2 --training.threads=1 --training.eval_batches=1 \
  --training.out_dir="$WORK/recompute" > run3.log 2>&1 \
  || { tail -n 20 run3.log; fail "meshtrain run recompute.toml"; }
grep -q "activation recomputation: full" run3.log || { tail -n 20 run3.log; fail "the job did not recompute"; }
grep -q "done: 2 steps" run3.log || { tail -n 20 run3.log; fail "the recomputing job did not finish"; }

# 2. Refusal to overwrite: exit 3, the file untouched; --force overwrites.
cp fresh.toml fresh.before
expect_failure "fresh.toml exists; pass --force to overwrite it" \
  "$MESHTRAIN" plan "${tiny_plan[@]}" --emit-config fresh.toml
set +e
"$MESHTRAIN" plan "${tiny_plan[@]}" --emit-config fresh.toml > /dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "overwriting without --force exited $rc, not 3"
cmp -s fresh.toml fresh.before || fail "the refused write changed fresh.toml"
"$MESHTRAIN" plan "${tiny_plan[@]}" --hardware.devices_per_node=1 --emit-config fresh.toml --force > /dev/null 2>&1 \
  || fail "--force did not overwrite"
grep -q "^workers = 1$" fresh.toml || { cat fresh.toml; fail "--force wrote no new layout"; }
expect_failure "needs --emit-config\|requires --emit-config\|Needs" "$MESHTRAIN" plan "${tiny_plan[@]}" --force
ls -a | grep -q "\.tmp-" && fail "a temporary file was left behind"

# 3. From a job config: 4 devices of 0.4 MB each (the hardware from a plan
# file) are too small for data parallelism: ZeRO. Only the layout and the
# batch change; a flag overrides the job as with --config alone.
tiny_config job.toml "$WORK/data/kjv.txt"
cat > small.toml <<'TOML'
[hardware]
device = "custom"
memory_gb = 0.0004
tflops = 0.1
devices_per_node = 4
TOML
"$MESHTRAIN" plan small.toml --config job.toml --emit-config zero.toml --training.steps=6 > plan2.txt 2> emit2.log \
  || { cat plan2.txt emit2.log; fail "plan --config --emit-config"; }
grep -q "recommended: zero-" plan2.txt || { cat plan2.txt; fail "no ZeRO recommendation"; }
grep -q "the rest as in job.toml" emit2.log || { cat emit2.log; fail "no mention of the base job"; }
python3 - <<'PY' || { cat zero.toml; fail "zero.toml"; }
import tomllib
c = tomllib.load(open("zero.toml", "rb"))
p, t = c["parallel"], c["training"]
assert p["workers"] == 4 and p["data"] == "allreduce" and p["zero_stage"] >= 1, p
assert t["batch_size"] * p["workers"] == 4, t   # job.toml's global batch (one worker of 4), now over 4 workers
assert t["batch_size"] % p["micro_batches"] == 0, (t, p)
assert t["steps"] == 6 and t["threads"] == 1 and t["out_dir"].endswith("/run"), t   # the job's, with the flag
assert c["optimizer"]["lr"] == 1e-3 and c["schedule"]["warmup_steps"] == 5, c    # untouched
assert c["checkpoint"]["every"] == 10 and c["model"]["n_embd"] == 32, c
PY
"$MESHTRAIN" run zero.toml --training.eval_batches=1 > run2.log 2>&1 || { tail -n 20 run2.log; fail "meshtrain run zero.toml"; }
grep -q "done: 6 steps" run2.log || { tail -n 20 run2.log; fail "zero job did not finish its 6 steps"; }
grep -qi "zero" run2.log || { tail -n 20 run2.log; fail "zero job ran without ZeRO"; }

# 4. Nothing fits: the plan prints, no file is written, exit 3.
sed 's/memory_gb = 0.0004/memory_gb = 0.0001/' small.toml > tiny_hw.toml
expect_failure "nothing fits on the hardware given" \
  "$MESHTRAIN" plan tiny_hw.toml --config job.toml --emit-config none.toml
[ ! -e none.toml ] || fail "a config was written though nothing fits"

echo "plan_emit_config: ok"
