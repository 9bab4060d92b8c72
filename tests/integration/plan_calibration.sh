# `meshtrain plan --config JOB.toml` predicts a job's per-rank peak memory
# and step time on this machine; the job then runs and its measured peak
# (the lead's tracked total) must be within 10% and its median step time
# within 25% of the prediction, for one process, plain data parallelism and
# every ZeRO stage on 2 workers, with gradient accumulation (one process
# in 4 micro-batches; ZeRO-2 on 2 workers in 2, which keeps a second
# gradient shard), with tensor parallelism (2 ways; 2 x 2 with ZeRO-1), and
# with pipeline parallelism (2 stages in 1F1B and zero-bubble, 2 x 2 with
# data parallelism: every stage's peak against its own prediction), and for
# a mixture of experts (4 experts, top-2: one process, 2 workers with every
# expert on each, 2 workers with 2 experts each, the tokens exchanged by
# all-to-all). Runs
# alone (RUN_SERIAL): a second test on
# the same 2 cores would be timed too. This VM now and then runs a second
# or so at half speed, which a single timing can land in: a configuration
# gets two more attempts (plan and run again), each after a 2 s pause so
# that it does not land in the same slow spell (CI saw tp2 forecast 25.6
# then 30.6 ms against 18-19 run; here it forecasts 16.4-18.8 against 18.0).
source "$(dirname "$0")/lib.sh"
make_text text.txt 200000
tiny_config job.toml "$WORK/text.txt"
# 4 blocks of width 128, a batch of 8 sequences of 64: ~35 ms a step, large
# enough that timer noise stays small, small enough for CI.
job=(--model.n_layer=4 --model.n_embd=128 --model.n_head=4 --model.block_size=64 --training.batch_size=8
     --training.steps=24 --training.log_every=1 --training.eval_every=0 --training.eval_batches=1
     --schedule.warmup_steps=0 --checkpoint.every=0 --parallel.timeout_s=60)

check() {
  check_once "$@" && return
  local attempt
  for attempt in 2 3; do
    sleep 2
    echo "$1: attempt $attempt"
    check_once "$@" && return
  done
  fail "$1: prediction off three times"
}

check_once() {
  local name=$1 workers=$2 stage=$3
  shift 3
  local args=("${job[@]}" --parallel.data=allreduce --parallel.workers="$workers" --parallel.zero_stage="$stage" "$@")
  "$MESHTRAIN" plan --config job.toml --json "${args[@]}" > "$name.plan.json" 2> "$name.plan.log" ||
    { cat "$name.plan.log"; fail "plan --config for $name"; }
  local cmd=("$MESHTRAIN" train job.toml "${args[@]}" --training.out_dir="$WORK/$name")
  [ "$workers" -gt 1 ] && cmd=("$MESHTRAIN" launch --nproc "$workers" -- "${cmd[@]}")
  rm -rf "$WORK/$name"
  "${cmd[@]}" > "$name.log" 2>&1 || { cat "$name.log"; fail "run $name"; }
  python3 - "$WORK/$name" <<'PY'
import json, statistics, sys
run = sys.argv[1]
plan = json.load(open(run + ".plan.json"))
records = [json.loads(line) for line in open(run + "/metrics.jsonl")]
steps = [r["step_ms"] / 1e3 for r in records if "step_ms" in r][3:]  # after the first steps' page faults
peak = [r for r in records if r.get("memory") == "peak"][-1]["peak_total_mb"] * (1 << 20)
measured_step = statistics.median(steps)
predicted_step = plan["step_s"]["total"]
predicted_peak = plan["memory_bytes"]["total"]
mem_err = abs(peak - predicted_peak) / peak
if plan.get("pipeline_parallel", 1) > 1:
    # Every worker's peak against its stage's prediction; the worst counts.
    workers = [r for r in records if "pipeline_stages" in r][-1]["pipeline_stages"]
    predicted = {s["stage"]: s["total_bytes"] for s in plan["stages"]}
    errors = []
    for w in workers:
        got = w["peak_total_mb"] * (1 << 20)
        errors.append(abs(got - predicted[w["stage"]]) / got)
        print(f"  worker {w['worker']} (stage {w['stage']}): peak {got / 2**20:.2f} MiB, predicted "
              f"{predicted[w['stage']] / 2**20:.2f} MiB ({errors[-1]:.1%}), {w['activation_slots']:.0f} slots")
    mem_err = max(errors)
    peak, predicted_peak = max(w["peak_total_mb"] for w in workers) * (1 << 20), max(predicted.values())
step_err = abs(measured_step - predicted_step) / measured_step
print(f"{run.split('/')[-1]}: peak {peak / 2**20:.2f} MiB, predicted {predicted_peak / 2**20:.2f} MiB ({mem_err:.1%}); "
      f"step {measured_step * 1e3:.1f} ms, predicted {predicted_step * 1e3:.1f} ms ({step_err:.1%}: "
      f"forward+backward {plan['step_s']['forward_backward'] * 1e3:.1f}, update {plan['step_s']['update'] * 1e3:.1f}, "
      f"communication {plan['step_s']['communication'] * 1e3:.1f}"
      + (f", expert all-to-all {plan['step_s']['expert_communication'] * 1e3:.1f}, routing imbalance "
         f"{plan['routing_imbalance']:.2f}" if plan["n_expert"] > 1 else "") + ")")
assert plan["workers"] >= 1 and plan["probe_steps"] > 0
sys.exit(0 if mem_err <= 0.10 and step_err <= 0.25 else 1)
PY
}

check one 1 0
for stage in 0 1 2 3; do check "zero$stage" 2 "$stage"; done
check one-m4 1 0 --parallel.micro_batches=4
check zero2-m2 2 2 --parallel.micro_batches=2
# Tensor parallelism: 2 tensor ways alone, and 2 x 2 with ZeRO-1 on the data axis.
check tp2 2 0 --parallel.tensor=2
check dp2-tp2 4 1 --parallel.tensor=2
# Pipeline parallelism: 2 stages, 4 micro-batches; alone and 2 x 2 with ZeRO-1 on the data axis.
check pp2-1f1b 2 0 --parallel.pipeline=2 --parallel.micro_batches=4 --parallel.data=none
check pp2-zb 2 0 --parallel.pipeline=2 --parallel.micro_batches=4 --parallel.schedule=zero_bubble --parallel.data=none
# 4 workers on 2 cores: the forecast times each stage's pieces in CPU time
# with all 4 probes running at once and bounds the step by all workers' CPU
# time over the cores (pipeline_forecast.hpp); timed by the wall clock, the
# same job had forecast either near its uncontended time or near twice it.
check dp2-pp2 4 1 --parallel.pipeline=2 --parallel.micro_batches=4
# Mixture of experts: every expert on each worker (1 and 2 workers), and split over 2 expert ranks.
# The forecast routes as the router starts; this small model's routing drifts within a few steps (the
# busier expert rank took 1.4-1.9x an even share of some layers' rows by step 7, dropless), which sets
# the busier rank's step time and its activations' high-water mark. Split over ranks, the experts take
# at most an even share of each sequence (capacity 1.0), so the check holds the forecast to what it
# can know.
moe=(--model.n_expert=4 --model.top_k=2 --training.steps=12)
check moe-one 1 0 "${moe[@]}"
check moe-dp2 2 0 "${moe[@]}" --parallel.expert=1
check moe-ep2 2 0 "${moe[@]}" --parallel.expert=2 --model.capacity_factor=1.0

# Bad input: a parameter-server job is refused with a reason.
expect_failure "parameter-server jobs are not forecast" \
  "$MESHTRAIN" plan --config job.toml --parallel.data=parameter_server --parallel.servers=1
echo "plan_calibration: ok"
