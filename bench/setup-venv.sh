#!/usr/bin/env bash
# Sets up the PyTorch peers for the benchmarks in bench/ (see bench/RESULTS.md)
# and the Python tools the tests check meshtrain's output with:
#   * bench/.venv (git-ignored): the current PyTorch release from PyPI, and
#     transformers, tokenizers, tensorboard and safetensors
#     (tests/integration/python_tools_lib.sh finds them there).
#     The Linux wheel on PyPI depends on several GB of nvidia-* CUDA packages
#     that are never used on a CPU-only machine, so torch is installed with
#     --no-deps plus its pure-Python dependencies and the few CUDA
#     libraries libtorch_cuda.so loads at `import torch` even without a GPU
#     (cuFile, cuSPARSELt, NVSHMEM, NCCL: about 0.7 GB, against 3.6 GB for
#     all of them; measured with torch 2.15); if `import torch` or a
#     forward/backward then fails, it falls back to a normal install.
#   * Debian's python3-torch (1.13), run with /usr/bin/python3, for the
#     "older stack" figure.
# Idempotent: each part is skipped when already present.
#   Usage: bench/setup-venv.sh [--no-apt] [--no-venv]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${MESHTRAIN_BENCH_VENV:-$here/.venv}"
do_apt=1
do_venv=1
for a in "$@"; do
  case "$a" in
    --no-apt) do_apt=0 ;;
    --no-venv) do_venv=0 ;;
    *) echo "usage: $0 [--no-apt] [--no-venv]" >&2; exit 2 ;;
  esac
done

# A base interpreter for the venv: prefer the python3 on PATH (3.11 here).
base_python="${PYTHON:-$(command -v python3)}"

smoke='
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(32, 4))
x = torch.randn(8, 16)
loss = torch.nn.functional.cross_entropy(m(x), torch.randint(0, 4, (8,)))
loss.backward()
torch.optim.AdamW(m.parameters(), lr=1e-3).step()
assert all(p.grad is not None for p in m.parameters())
print("torch", torch.__version__, "ok, loss", loss.item())
'

if [ "$do_apt" = 1 ]; then
  if dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
    echo "setup-venv: python3-torch (Debian) present"
  else
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    echo "setup-venv: installing Debian python3-torch"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch
  fi
  OMP_NUM_THREADS=1 /usr/bin/python3 -c "$smoke"
fi

if [ "$do_venv" = 1 ]; then
  if [ -x "$venv/bin/python" ] && OMP_NUM_THREADS=1 "$venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "setup-venv: $venv already has torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
  else
    [ -x "$venv/bin/python" ] || "$base_python" -m venv "$venv"
    pip=("$venv/bin/python" -m pip install --no-input --progress-bar off)
    "${pip[@]}" --upgrade pip wheel packaging
    # torch itself without its nvidia-* / triton requirements ...
    "${pip[@]}" --no-deps torch
    # ... and its pure-Python requirements (read from the installed metadata,
    # dropping the CUDA-only ones: nvidia-*, cuda-* (cuda-toolkit, cuda-bindings),
    # triton), but for the CUDA libraries `import torch` loads (pinned as
    # torch pins them; cuFile comes through cuda-toolkit's extra, unpinned).
    deps=$("$venv/bin/python" - <<'EOF'
import importlib.metadata as md
from packaging.requirements import Requirement
out = []
for r in md.requires("torch") or []:
    req = Requirement(r)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    name = req.name.lower()
    loaded_at_import = name.startswith(("nvidia-cusparselt-", "nvidia-nvshmem-", "nvidia-nccl-"))
    if not loaded_at_import and (name.startswith(("nvidia-", "cuda-")) or name in ("triton", "pytorch-triton")):
        continue
    out.append(str(req).split(";")[0].strip())
print(" ".join(out))
EOF
    ) || deps="filelock typing-extensions sympy networkx jinja2 fsspec setuptools"
    deps="$deps nvidia-cufile"
    echo "setup-venv: torch dependencies, without the CUDA packages import does not load: $deps"
    # numpy only silences a warning at import; packaging is used above.
    # shellcheck disable=SC2086
    "${pip[@]}" $deps numpy packaging
    if ! OMP_NUM_THREADS=1 "$venv/bin/python" -c "$smoke"; then
      echo "setup-venv: torch without CUDA packages failed; installing normally" >&2
      "${pip[@]}" torch
    fi
  fi
  OMP_NUM_THREADS=1 "$venv/bin/python" -c "$smoke"
  tools=(transformers tokenizers tensorboard safetensors)
  if OMP_NUM_THREADS=1 "$venv/bin/python" -c "import $(IFS=,; echo "${tools[*]}")" 2>/dev/null; then
    echo "setup-venv: $venv already has ${tools[*]}"
  else
    "$venv/bin/python" -m pip install --no-input --progress-bar off "${tools[@]}"
  fi
fi
