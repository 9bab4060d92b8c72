# `meshtrain plan` from the command line: a plan file with flags over it,
# the table and --json, the profiles, --measure on this machine, and bad
# input (exit status 3 with the field named; "does not fit anywhere").
source "$(dirname "$0")/lib.sh"

grep -q "time.target_days" <<< "$("$MESHTRAIN" plan --help)" || fail "plan --help lists no keys"
"$MESHTRAIN" plan --list | grep -q "^  h200 .*141.0 GB" || fail "plan --list lacks the H200"

# The notes' worked scenario as a plan file; a flag overrides the file.
cat > scenario.toml <<'TOML'
[model]
kind = "vit"
layers = 32
hidden = 1600
heads = 16
image_size = 224
patch_size = 14
classes = 1000

[training]
global_batch = 512
base_lr = 0.001
reference_batch = 256

[hardware]
device = "a100-80gb"
nodes = 4

[time]
single_device_days = 10
target_days = 2
TOML
"$MESHTRAIN" plan scenario.toml --hardware.nodes=1 > table.txt || { cat table.txt; fail "plan scenario.toml"; }
grep -q "recommended: dp-ring" table.txt || { cat table.txt; fail "no data-parallel recommendation"; }
grep -q "^ZeRO-3 / FSDP" table.txt || fail "the table lacks ZeRO-3"
grep -q "learning rate: 0.001 at batch 256 -> 0.002 at batch 512" table.txt || { cat table.txt; fail "no lr rule"; }
"$MESHTRAIN" plan scenario.toml --hardware.nodes=1 --json --svg plan.svg > plan.json
python3 -c "
import xml.etree.ElementTree as ET
root = ET.parse('plan.svg').getroot()
texts = [t.text for t in root.iter('{http://www.w3.org/2000/svg}text')]
assert any('recommended dp-ring' in (t or '') for t in texts), texts
assert 'ZeRO-3 / FSDP (+ parameters sharded)' in texts, texts
" || fail "plan --svg"
python3 - <<'PY' || fail "plan --json"
import json
p = json.load(open("plan.json"))
keys = [s["key"] for s in p["strategies"]]
assert keys[:8] == ["single", "dp-ring", "dp-tree", "dp-reduction-server", "parameter-server", "zero-1", "zero-2",
                    "zero-3"], keys
assert p["recommendation"]["key"] == "dp-ring"
ring = p["strategies"][1]
assert ring["fits"] and ring["devices"] == 8 and ring["train_days"] < 2, ring
single = p["strategies"][0]
assert abs(single["train_days"] - 10) < 1e-9
for kind in ("parameters", "gradients", "optimizer_state", "activations", "total"):
    assert ring["memory_bytes"][kind] >= 0
# 16 bytes of model state per parameter for mixed-precision Adam.
assert abs(ring["memory_bytes"]["parameters"] * 8 - (ring["memory_bytes"]["total"] - ring["memory_bytes"]["activations"])) < 1e3
assert p["learning_rate"]["scaled_lr"] == 0.002
PY

# This machine, measured: a tiny GPT fits one core's share of the memory.
"$MESHTRAIN" plan --measure --model.layers=2 --model.hidden=64 --model.heads=2 --model.seq_len=32 --model.vocab=256 \
  --training.global_batch=8 > measured.txt 2> measure.log || { cat measure.log; fail "plan --measure"; }
grep -q "measured: .* cores, .* GFLOP/s per core" measure.log || { cat measure.log; fail "no measurement"; }
grep -q "^hardware: 1 node x .* custom" measured.txt || { cat measured.txt; fail "measured profile not used"; }
grep -q "recommended: " measured.txt || fail "no recommendation on the measured profile"

# Bad input: exit status 3, the field named.
bad() {
  local pattern=$1; shift
  set +e
  "$MESHTRAIN" plan "$@" > /dev/null 2> bad.err
  local rc=$?
  set -e
  [ "$rc" -eq 3 ] || { cat bad.err; fail "exit $rc, not 3, for: $*"; }
  grep -q -- "$pattern" bad.err || { cat bad.err; fail "stderr lacks '$pattern' for: $*"; }
}
bad "model.layers: must be positive" scenario.toml --model.layers=-1
bad "hardware.nodes: needs at least one node" scenario.toml --hardware.nodes=0
bad "model.heads: 7 heads do not divide the hidden size 1600" scenario.toml --model.heads=7
bad "unknown device 'h9000'" scenario.toml --hardware.device=h9000
bad "hardware.colour: unknown key" scenario.toml --hardware.colour=red
bad "missing.toml: cannot read the plan file" missing.toml
bad "nothing to plan"
printf '[model\nlayers = 2\n' > broken.toml
bad "broken.toml:1: malformed TOML" broken.toml

# Memory smaller than anything needs: a clear answer, not an error.
"$MESHTRAIN" plan scenario.toml --hardware.nodes=1 --hardware.devices_per_node=1 --hardware.memory_gb=4 > small.txt
grep -q "recommended: none" small.txt || { cat small.txt; fail "no 'none' recommendation"; }
grep -q "Does not fit anywhere on 1 device" small.txt || { cat small.txt; fail "no 'does not fit anywhere'"; }
grep -q "The smallest configuration that fits: " small.txt || { cat small.txt; fail "no smallest configuration"; }
echo "plan: ok"
