#!/usr/bin/env bash
# The main job: the default error-budget report (every recipe, the CPU emulation, and the CUDA kernel
# when a GPU is present), written to ./flashcheck-report unless arguments say otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${FLASHCHECK_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target flashcheck
exec "$build/tools/flashcheck" report "$@"
