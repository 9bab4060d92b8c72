#!/usr/bin/env python3
"""The device check's summary (scripts/gpu-check.sh): reads what the stages
left in OUT (stages.tsv, facts.txt, each stage's .out, the gtest reports,
the GPT-2 run's step records) and writes OUT/summary.json; prints its main
fields as one line.

Usage: gpu_check_summary.py OUT EXIT_STATUS SECONDS
"""
import json, os, re, sys

out, status, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def read(name):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read().strip()
    except OSError:
        return None

def last_json(name):  # the last line of a stage's stdout that parses as JSON
    text = read(name) or ""
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None

facts = {}
for line in (read("facts.txt") or "").splitlines():
    key, _, value = line.partition("=")
    facts[key] = value
stages = {}
for line in (read("stages.tsv") or "").splitlines():
    name, result, secs, limit = line.split("\t")
    stages[name] = {"result": result, "seconds": int(secs), "limit_s": int(limit)}

def gtest_counts(stage):
    """A gtest stage's cases passed, failed and skipped: from its JSON report,
    else (killed before gtest wrote it) from its log's lines; None if it did
    not run."""
    try:
        with open(os.path.join(out, stage + ".json")) as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = None
    if report is not None:
        tests = {"passed": 0, "failed": 0, "skipped": 0, "failed_tests": [], "source": "gtest json"}
        for suite in report.get("testsuites", []):
            for t in suite.get("testsuite", []):
                name = suite["name"] + "." + t["name"]
                if t.get("failures"):
                    tests["failed"] += 1
                    tests["failed_tests"].append(name)
                elif t.get("result") == "SKIPPED":
                    tests["skipped"] += 1
                elif t.get("status") == "RUN":
                    tests["passed"] += 1
        return tests
    log = read(stage + ".out")
    if log is None:
        return None
    return {"passed": len(re.findall(r"^\[       OK \] .* \(\d+ ms\)$", log, re.M)),
            "failed": len(re.findall(r"^\[  FAILED  \] .* \(\d+ ms\)$", log, re.M)),
            "skipped": len(re.findall(r"^\[  SKIPPED \] .* \(\d+ ms\)$", log, re.M)),
            "failed_tests": re.findall(r"^\[  FAILED  \] (\S+) \(\d+ ms\)$", log, re.M),
            "source": "log lines (no gtest report: the run was cut short)"}

tests = gtest_counts("unit_cuda")
nccl_tests = gtest_counts("unit_nccl")

gemm = last_json("gemm_rate.out")

def meshtrain_gpt2():  # medians of the step records after 3 warm-up steps
    import statistics
    try:
        with open(os.path.join(out, "gpt2", "run", "metrics.jsonl")) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    rows = []
    for line in lines:  # a run cut off by its limit may leave half a line last
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    steps = [r for r in rows if "tokens_per_s" in r][3:]
    if not steps:
        return None
    run = {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in steps),
           "step_ms": statistics.median(r["step_ms"] for r in steps),
           "flops_per_token": steps[0].get("flop_per_token"), "timed_steps": len(steps), "batch": 16}
    if all("mfu" in r for r in steps):
        run["mfu_vs_datasheet"] = round(statistics.median(r["mfu"] for r in steps), 4)  # the peak the training log names
    return run

torch_runs = {mode: last_json(f"torch_{mode}.out") for mode in ("eager", "compile")}
square = (gemm or {}).get("square_8192", {}).get("forward_tflops")
meshtrain_run = meshtrain_gpt2()
def json_document(name):  # a stage's stdout that is one indented JSON document
    text = read(name) or ""
    start = 0 if text.startswith("{") else text.find("\n{") + 1  # 0 again when there is none
    try:
        return json.loads(text[start:])
    except ValueError:
        return None

plan = json_document("plan_gpt2.out")
forecast = None
if plan and plan.get("step_s"):
    forecast = {"step_ms": round(plan["step_s"]["total"] * 1e3, 3),
                "forward_backward_ms": round(plan["step_s"].get("forward_backward", 0) * 1e3, 3),
                "update_ms": round(plan["step_s"].get("update", 0) * 1e3, 3),
                "memory_bytes": plan.get("memory_bytes")}
    if meshtrain_run:
        forecast["error_vs_measured"] = round(forecast["step_ms"] / meshtrain_run["step_ms"] - 1, 4)
for run in list(torch_runs.values()) + [meshtrain_run]:
    if run and square and run.get("flops_per_token"):
        run["mfu_vs_gemm_rate"] = round(run["tokens_per_s"] * run["flops_per_token"] / (square * 1e12), 4)
if meshtrain_run:
    for mode, run in torch_runs.items():
        if run:
            meshtrain_run[f"vs_torch_{mode}"] = round(meshtrain_run["tokens_per_s"] / run["tokens_per_s"], 3)

summary = {
    "gpu": facts.get("gpu"),
    "driver": facts.get("driver"),
    "cuda_driver_api": facts.get("cuda_driver_api"),
    "gpu_memory": facts.get("gpu_memory"),
    "versions": {
        "python": facts.get("python"),
        "torch": facts.get("torch"),
        "torch_cuda": facts.get("torch_cuda"),
        "glibc": facts.get("glibc"),
        "cublaslt": (gemm or {}).get("cublaslt"),
        "cuda_runtime_in_meshtrain": (gemm or {}).get("runtime"),
        "bundle": facts.get("bundle"),
    },
    "cublaslt_dir": facts.get("cublaslt_dir"),
    "bundle_runs": facts.get("bundle_runs"),
    "meshtrain_gpu_training": facts.get("meshtrain_gpu_training", "not run"),
    "meshtrain_gpu_probe": facts.get("probe"),
    "gemm_rate": gemm,
    "unit_cuda": tests,
    "meshtrain_gpt2": meshtrain_run,
    "torch_gpt2": torch_runs,
    "staged_overhead": last_json("staged_overhead.out"),
    "plan_gpt2_forecast": forecast,
    "unit_nccl": nccl_tests if nccl_tests is not None else facts.get("unit_nccl", "not run"),
    "dev_shm": facts.get("dev_shm"),
    "flop_count": "MFU counts 6*N_matmul + 12*L*C*T FLOPs per token, against 989 TFLOP/s (mfu_vs_datasheet) "
                  "and against this run's 8192^3 bf16 GEMM rate (mfu_vs_gemm_rate)",
    "stages": stages,
    "seconds": seconds,
    "exit_status": status,
    "reason": facts.get("reason"),
}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
print(json.dumps({k: summary[k] for k in ("gpu", "meshtrain_gpu_training", "unit_cuda", "meshtrain_gpt2",
                                          "exit_status")}))
