# The prepared device check (scripts/gpu-check.sh) on a machine without a
# GPU, with a bundle made from this build (scripts/gpu-bundle.sh): it
# unpacks the bundle, finds no driver, writes summary.json naming the
# reason and exits 3, and takes its unpacked copy away. The check runs for
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
leftover=$(find "$WORK" -maxdepth 1 -name 'gpu-bundle.*' ! -name 'gpu-bundle.tar.gz')
[ -z "$leftover" ] || fail "gpu-check.sh left its unpacked bundle: $leftover"
