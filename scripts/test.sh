#!/usr/bin/env bash
# The whole test suite from a fresh clone: install what is missing, configure, build, run ctest.
# GPU tests skip visibly where there is no GPU. Extra arguments go to ctest (e.g. -L property);
# without any, the long campaigns labelled slow are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Ninja for a new build folder (a folder configured before keeps its generator): it compiles a target's
# sources while the libraries it links are still being built, where CMake's Makefiles wait for them, so
# on 2 cores both stay busy.
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"
build=${FLASHCHECK_BUILD_DIR:-build}
jobs=${FLASHCHECK_JOBS:-$(nproc)}
# CUDA is compiled wherever nvcc is found (CI checks that it compiles), also when scripts/report.sh left
# the build folder configured without it.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLASHCHECK_CUDA="${FLASHCHECK_CUDA:-AUTO}"
cmake --build "$build" -j"$jobs"
# Without arguments: everything but the long campaigns labelled slow (ctest -L slow runs those).
if [ $# -eq 0 ]; then set -- -LE slow; fi
ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 900 "$@"
