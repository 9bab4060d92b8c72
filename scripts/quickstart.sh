#!/usr/bin/env bash
# From a fresh Debian 12 machine to a trained model: installs the Debian
# packages, prepares the data, builds, and runs the default job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/prepare-data.sh
scripts/build.sh
exec build/src/meshtrain/meshtrain run examples/tiny-gpt.toml "$@"
