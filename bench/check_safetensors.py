"""Reads a meshtrain checkpoint with the Python `safetensors` library (the
reference implementation) to show the files need no converter.

Usage: bench/.venv/bin/python bench/check_safetensors.py CHECKPOINT_STEP_DIR
(bench/setup-venv.sh makes the venv; `pip install safetensors` into it.)
"""
import sys

from safetensors import safe_open
from safetensors.numpy import load_file

step_dir = sys.argv[1].rstrip("/")
model = load_file(f"{step_dir}/model.safetensors")
with safe_open(f"{step_dir}/model.safetensors", "np") as f:
    meta = f.metadata()
state = load_file(f"{step_dir}/train_state.safetensors")
with safe_open(f"{step_dir}/train_state.safetensors", "np") as f:
    state_meta = f.metadata()

assert meta.get("format") == "pt", meta
if meta.get("model") == "gpt":
    # Hugging Face GPT2Model names and Conv1D (in, out) weight layout.
    c = model["wte.weight"].shape[1]
    assert model["h.0.attn.c_attn.weight"].shape == (c, 3 * c)
    assert model["h.0.mlp.c_fc.weight"].shape == (c, 4 * c)
    assert "ln_f.weight" in model and "wpe.weight" in model
for name in model:
    assert any(f"{s}.{name}" in state for s in ("exp_avg", "momentum_buffer")) or not state, name
print(f"ok: {len(model)} parameter tensors, {len(state)} optimizer-state tensors, "
      f"step {state_meta['step']}, optimizer {state_meta['optimizer']}")
