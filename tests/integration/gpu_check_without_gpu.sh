# The prepared device check (scripts/gpu-check.sh) on a machine without a
# GPU, with a bundle made from this build (scripts/gpu-bundle.sh): it
# unpacks the bundle, finds no driver, writes summary.json naming the
# reason and exits 3, and takes its unpacked copy and its stages' folder
# away, leaving in $OUT no more than the device tool brings back (8 files,
# 16 MiB each, 2 folders down). Its stages keep time for the ones after
# them in an order that never grows (else a later stage can get none). A
# TERM mid-stage still leaves the summary and the packed stages. The check runs for
# real only on a lent GPU machine, in a few minutes that a broken script
# would waste; this runs its own plumbing (bundle, stage record, summary)
# on every CI run.
source "$(dirname "$0")/lib.sh"
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  echo "SKIP: this machine has a GPU: scripts/gpu-check.sh runs whole here"; exit 77
fi
build=$(cd "$(dirname "$MESHTRAIN")/../.." && pwd)
[ -x "$build/tests/unit_cuda" ] || { echo "SKIP: $build is not a CUDA build (no tests/unit_cuda): no bundle to make"; exit 77; }

BUILD_DIR="$build" bash "$SRC/scripts/gpu-bundle.sh" "$WORK/gpu-bundle" > bundle.log 2>&1 ||
  { cat bundle.log; fail "gpu-bundle.sh"; }
rm -rf "$WORK/gpu-bundle"  # the check takes the .tar.gz, as a device run carries it
status=0
TMPDIR="$WORK" OUT="$WORK/check" bash "$SRC/scripts/gpu-check.sh" "$WORK/gpu-bundle.tar.gz" > check.log 2>&1 ||
  status=$?
[ "$status" -eq 3 ] || { cat check.log; fail "gpu-check.sh without a GPU: exit status $status, not 3"; }
python3 - "$WORK/check/summary.json" "$WORK/gpu-bundle.tar.gz" <<'PY' || { cat check.log; fail "summary.json"; }
import json, sys
s = json.load(open(sys.argv[1]))
assert s["exit_status"] == 3 and "nvidia-smi failed" in s["reason"], s
assert s["meshtrain_gpu_training"] == "not run" and s["unit_cuda"] is None, s
assert s["stages"]["nvidia_smi"]["result"].startswith("failed"), s["stages"]
assert s["versions"]["bundle"], s["versions"]  # the bundle's MANIFEST was read
print(f"gpu-check.sh without a GPU: exit 3, summary.json: {s['reason']}")
PY
leftover=$(find "$WORK" -maxdepth 1 \( -name 'gpu-bundle.*' ! -name 'gpu-bundle.tar.gz' \) -o -name 'gpu-check.*')
[ -z "$leftover" ] || fail "gpu-check.sh left its unpacked bundle or its stages' folder: $leftover"
files=$(cd "$WORK/check" && find . -type f | sort)
[ "$files" = "$(printf './gpu-check.log\n./stages.tar.gz\n./summary.json')" ] ||
  fail "gpu-check.sh's \$OUT holds more or other than its log, summary and packed stages: $files"
[ -z "$(find "$WORK/check" -type f -size +16M)" ] || fail "a file in gpu-check.sh's \$OUT is over 16 MiB"
tar -tzf "$WORK/check/stages.tar.gz" | grep -qx './nvidia_smi.err' ||
  fail "stages.tar.gz lacks the nvidia_smi stage's output: $(tar -tzf "$WORK/check/stages.tar.gz" | tr '\n' ' ')"
grep -q '"exit_status": 3' check.log || fail "gpu-check.sh did not print its whole summary.json last"
python3 - "$SRC/scripts/gpu-check.sh" <<'PY' || fail "gpu-check.sh's stages keep time for later stages out of order"
import re, sys
kept = [(m.group(1), int(m.group(2))) for m in re.finditer(r"^\s*stage (\w+) \d+ (\d+) ", open(sys.argv[1]).read(), re.M)]
assert len(kept) >= 10, kept
for (a, x), (b, y) in zip(kept, kept[1:]):
    assert x >= y, f"{a} keeps {x} s for the stages after it, {b} after it keeps {y}"
PY

# Stopped from outside mid-stage (the device tool's limit sends TERM to the whole process group,
# tee included): the check still sums up and packs what it has, naming the stage it was in. A
# first stage that takes its time is needed for the signal to land inside one; `sleep` plays
# nvidia-smi for that only (nothing here reads its output).
mkdir -p "$WORK/slow-bin"
printf '#!/bin/sh\nexec sleep 30\n' > "$WORK/slow-bin/nvidia-smi"
chmod +x "$WORK/slow-bin/nvidia-smi"
PATH="$WORK/slow-bin:$PATH" TMPDIR="$WORK" OUT="$WORK/stopped" setsid bash "$SRC/scripts/gpu-check.sh" \
  "$WORK/gpu-bundle.tar.gz" > stopped.log 2>&1 &
check_pid=$!
# Up to 60 s for the stage to begin: a loaded machine (the whole suite at -j2) unpacks the
# bundle slowly, and a TERM before the stage would test something else.
began=0
for _ in $(seq 600); do
  if grep -q "== nvidia_smi" "$WORK/stopped/gpu-check.log" 2> /dev/null; then began=1; break; fi
  sleep 0.1
done
kill -TERM -- "-$check_pid"
[ "$began" -eq 1 ] || { wait "$check_pid" || true; cat stopped.log; fail "gpu-check.sh's nvidia_smi stage never began"; }
wait "$check_pid" || true
python3 - "$WORK/stopped/summary.json" <<'PY' || { cat stopped.log; fail "gpu-check.sh stopped by TERM"; }
import json, sys
s = json.load(open(sys.argv[1]))
assert s["exit_status"] == 1 and s["stages"]["nvidia_smi"]["result"] == "stopped by a signal", s
PY
[ -f "$WORK/stopped/stages.tar.gz" ] || fail "gpu-check.sh stopped by TERM packed no stages.tar.gz"
[ -z "$(find "$WORK" -maxdepth 1 -name 'gpu-check.*')" ] || fail "gpu-check.sh stopped by TERM left its stages' folder"
echo "gpu-check.sh stopped by TERM mid-stage: summary.json and stages.tar.gz written, the stage named"
