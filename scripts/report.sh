#!/usr/bin/env bash
# The main job: the default error-budget report (every recipe, the CPU emulation, and the CUDA kernel
# when a GPU is present), written to ./flashcheck-report unless arguments say otherwise.
#
# It builds only the flashcheck executable, and the CUDA kernels only where a GPU can run them: on a
# machine without one they would be compiled for nothing (about half of the build). FLASHCHECK_CUDA=ON
# or OFF overrides the detection.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Ninja for a new build folder (a folder configured before keeps its generator): it compiles a target's
# sources while the libraries it links are still being built, where CMake's Makefiles wait for them, so
# on 2 cores both stay busy.
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"
build=${FLASHCHECK_BUILD_DIR:-build}
cuda=${FLASHCHECK_CUDA:-}
if [ -z "$cuda" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then cuda=AUTO; else cuda=OFF; fi
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLASHCHECK_CUDA="$cuda" >/dev/null
cmake --build "$build" -j"$(nproc)" --target flashcheck
exec "$build/tools/flashcheck" report "$@"
