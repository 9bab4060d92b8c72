# The Python tools users check meshtrain's output with (transformers,
# tokenizers, tensorboard, safetensors, numpy, torch), from the virtual
# environment bench/setup-venv.sh makes ($MESHTRAIN_TORCH_VENV, else
# bench/.venv; scripts/install-deps.sh --tests runs it). Sourced after lib.sh.
#   require_python_modules MODULE...  sets TOOLS_PYTHON to the venv's python,
#     or exits 77 (skipped) naming the first module that cannot be imported.
#   missing_python_tool WHY  that skip; with MESHTRAIN_REQUIRE_PY_TOOLS=1
#     (scripts/test.sh under CI=true) a failure instead.
TOOLS_VENV="${MESHTRAIN_TORCH_VENV:-$SRC/bench/.venv}"
TOOLS_PYTHON="$TOOLS_VENV/bin/python"
missing_python_tool() {
  if [ "${MESHTRAIN_REQUIRE_PY_TOOLS:-0}" = 1 ]; then
    echo "FAIL: $1 (MESHTRAIN_REQUIRE_PY_TOOLS=1: the Python tools are required, not skipped)" >&2
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}
require_python_modules() {
  [ -x "$TOOLS_PYTHON" ] || missing_python_tool "no Python tools venv at $TOOLS_VENV (bench/setup-venv.sh makes it)"
  local module
  for module in "$@"; do
    OMP_NUM_THREADS=1 "$TOOLS_PYTHON" -c "import $module" 2> /dev/null ||
      missing_python_tool "Python module $module is not installed in $TOOLS_VENV (bench/setup-venv.sh installs it)"
  done
}
