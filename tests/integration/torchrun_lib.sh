# The real torchruns, for the torchrun tests; sourced after lib.sh.
#   TORCHRUN_OLD  Debian's /usr/bin/torchrun (PyTorch 1.13, python3-torch:
#                 scripts/install-deps.sh --tests installs it), when it runs
#   TORCHRUN_NEW  the current PyTorch's, from a virtual environment
#                 ($MESHTRAIN_TORCH_VENV, else bench/.venv: bench/setup-venv.sh)
# Either array is empty where that torchrun is absent. Flags are written with
# underscores (--nproc_per_node): 1.13 knows only those, 2.x both spellings.
TORCHRUN_OLD=()
TORCHRUN_NEW=()
if [ -x /usr/bin/torchrun ] && OMP_NUM_THREADS=1 /usr/bin/python3 -c "import torch" 2> /dev/null; then
  # 1.13's default --redirects/--tee fail to parse on Python 3.11: give both.
  TORCHRUN_OLD=(/usr/bin/torchrun --redirects 1 --tee 1 --log_dir "$WORK/torchrun-logs")
fi
torch_venv="${MESHTRAIN_TORCH_VENV:-$SRC/bench/.venv}"
if [ -x "$torch_venv/bin/torchrun" ] && OMP_NUM_THREADS=1 "$torch_venv/bin/python" -c "import torch" 2> /dev/null; then
  TORCHRUN_NEW=("$torch_venv/bin/torchrun")
fi
old_torchrun_note="Debian's torchrun is not installed (apt-get install python3-torch)"
new_torchrun_note="the current PyTorch's torchrun is not installed (bench/setup-venv.sh makes bench/.venv; or set MESHTRAIN_TORCH_VENV)"
# The current torchrun is one of the Python tools bench/.venv holds: under
# MESHTRAIN_REQUIRE_PY_TOOLS=1 (scripts/test.sh under CI=true) its absence
# fails the test instead of skipping (part of) it.
if [ ${#TORCHRUN_NEW[@]} -eq 0 ] && [ "${MESHTRAIN_REQUIRE_PY_TOOLS:-0}" = 1 ]; then
  echo "FAIL: $new_torchrun_note (MESHTRAIN_REQUIRE_PY_TOOLS=1: the Python tools are required, not skipped)" >&2
  exit 1
fi
