# The device check's summary (scripts/gpu_check_summary.py) on stage outputs
# this build makes for real: unit_cuda's and unit_nccl's gtest reports
# (every GPU case skipped here), a tiny GPT's step records in the GPT-2 stage's place (a last line
# cut off, as a run stopped at its limit leaves it), and plan --config's
# indented JSON in the forecast stage's place. The summary has only ever
# read such files on a lent GPU, where a mistake would lose the results.
source "$(dirname "$0")/lib.sh"
build=$(cd "$(dirname "$MESHTRAIN")/../.." && pwd)
[ -x "$build/tests/unit_cuda" ] || { echo "SKIP: $build is not a CUDA build (no tests/unit_cuda)"; exit 77; }

out="$WORK/stages"
mkdir -p "$out/gpt2"
"$build/tests/unit_cuda" --gtest_output="json:$out/unit_cuda.json" > "$out/unit_cuda.out" 2>&1 ||
  { cat "$out/unit_cuda.out"; fail "unit_cuda without a GPU"; }
if [ -x "$build/tests/unit_nccl" ]; then
  "$build/tests/unit_nccl" --gtest_output="json:$out/unit_nccl.json" > "$out/unit_nccl.out" 2>&1 ||
    { cat "$out/unit_nccl.out"; fail "unit_nccl without a GPU"; }
fi
cases=$(python3 -c 'import json, sys; print(sum(len(s["testsuite"]) for s in json.load(open(sys.argv[1]))["testsuites"]))' \
  "$out/unit_cuda.json")

make_text text.txt 50000
tiny_config job.toml "$WORK/text.txt"
"$MESHTRAIN" train job.toml --training.steps=8 --training.log_every=1 --training.eval_every=0 \
  --training.out_dir="$out/gpt2/run" > train.log 2>&1 || { cat train.log; fail "the tiny GPT"; }
printf '{"step": 9, "tokens_per_s": 1' >> "$out/gpt2/run/metrics.jsonl"  # cut off mid-line
"$MESHTRAIN" plan --config job.toml --json > "$out/plan_gpt2.out" 2> plan.log || { cat plan.log; fail "plan --config"; }
printf 'nvidia_smi\tpassed\t1\t15\nmeshtrain_gpt2\tpassed\t9\t60\n' > "$out/stages.tsv"
printf 'gpu=NVIDIA H100 80GB HBM3\nunit_nccl=passed\n' > "$out/facts.txt"

# The names the summary reads are the ones gpu-check.sh writes.
for written in 'gtest_output="json:$out/unit_cuda.json"' 'gtest_output="json:$out/unit_nccl.json"' \
  'gpt2=$out/gpt2' '--training.out_dir="$gpt2/run"' 'stage plan_gpt2 '; do
  grep -qF -- "$written" "$SRC/scripts/gpu-check.sh" || fail "gpu-check.sh no longer writes $written"
done
python3 "$SRC/scripts/gpu_check_summary.py" "$out" 0 42 > summary.log || { cat summary.log; fail "gpu_check_summary.py"; }
python3 - "$out/summary.json" "$cases" <<'PY' || fail "summary.json"
import json, sys
s, cases = json.load(open(sys.argv[1])), int(sys.argv[2])
u = s["unit_cuda"]
# Without a GPU every case skips but those that need none (a GPU's absence is an error).
assert u["source"] == "gtest json" and u["skipped"] + u["passed"] == cases and u["skipped"] > u["passed"], u
assert u["failed"] == 0 and u["failed_tests"] == [], u
g = s["meshtrain_gpt2"]
assert g["timed_steps"] == 8 - 3 and g["tokens_per_s"] > 0 and g["step_ms"] > 0 and g["flops_per_token"] > 0, g
f = s["plan_gpt2_forecast"]
assert f["step_ms"] > 0 and f["memory_bytes"]["parameters"] > 0, f
assert abs(f["error_vs_measured"] - (f["step_ms"] / g["step_ms"] - 1)) < 1e-3, f
n = s["unit_nccl"]
assert n == "passed" or (n["skipped"] > 0 and n["failed"] == 0), n  # the report's counts, where unit_nccl was built
assert s["gpu"] == "NVIDIA H100 80GB HBM3" and s["exit_status"] == 0, s
assert s["stages"]["meshtrain_gpt2"] == {"result": "passed", "seconds": 9, "limit_s": 60}, s["stages"]
assert s["gemm_rate"] is None and s["torch_gpt2"] == {"eager": None, "compile": None}, s
print(f"summary.json from this build's outputs: {u['skipped']} of {cases} GPU cases skipped, {g['timed_steps']} timed steps, "
      f"forecast {f['step_ms']:.2f} ms against {g['step_ms']:.2f} ms")
PY
