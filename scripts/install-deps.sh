#!/usr/bin/env bash
# Installs every Debian package meshtrain needs to build, test, and run its
# default job. Safe to run again: apt-get skips what is already installed.
#   --tests  also the real launchers the integration tests start: Debian's
#            PyTorch (its /usr/bin/torchrun), Slurm and munge, PyYAML (the
#            Kubernetes manifests are parsed).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config
  # GEMM backends (chosen by measurement: see bench/RESULTS.md); OpenMP is
  # GCC's libgomp, part of the toolchain
  libdnnl-dev libopenblas-dev
  # config, JSON, command line
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev python3
  # network namespaces for the two-host test (ip netns, veth)
  iproute2
  # the MPI transport and the OpenMPI peer benchmark (optional at build time)
  openmpi-bin libopenmpi-dev
  # gzip-compressed data files (Fashion-MNIST)
  zlib1g-dev
  # the BPE tokenizer's pre-tokenizer regex (GPT-2's, with JIT)
  libpcre2-dev
  # data: the King James Bible text and Fashion-MNIST
  bible-kjv-text bible-kjv dataset-fashion-mnist
)

if [ "${1:-}" = "--tests" ]; then
  packages+=(python3-torch slurm-wlm munge python3-yaml)
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--tests]" >&2
  exit 2
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi
