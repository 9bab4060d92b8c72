# The Python tools users check meshtrain's output with (transformers,
# tokenizers, tensorboard, safetensors, numpy, torch), from the virtual
# environment bench/setup-venv.sh makes ($MESHTRAIN_TORCH_VENV, else
# bench/.venv; scripts/install-deps.sh --tests runs it). Sourced after lib.sh.
#   require_python_modules MODULE...  sets TOOLS_PYTHON to the venv's python,
#     or exits 77 (skipped) naming the first module that cannot be imported.
TOOLS_VENV="${MESHTRAIN_TORCH_VENV:-$SRC/bench/.venv}"
TOOLS_PYTHON="$TOOLS_VENV/bin/python"
require_python_modules() {
  [ -x "$TOOLS_PYTHON" ] || { echo "SKIP: no Python tools venv at $TOOLS_VENV (bench/setup-venv.sh makes it)"; exit 77; }
  local module
  for module in "$@"; do
    OMP_NUM_THREADS=1 "$TOOLS_PYTHON" -c "import $module" 2> /dev/null ||
      { echo "SKIP: Python module $module is not installed in $TOOLS_VENV (bench/setup-venv.sh installs it)"; exit 77; }
  done
}
