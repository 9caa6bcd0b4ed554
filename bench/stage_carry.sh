#!/bin/sh
# Copies the built binaries (not the object files) into build-carry/ so that they fit the device carry
# limit (64 MiB). Works on the project build tree (kernels/cuda, tests/gpu, bench) and on a stand-alone
# tree (cuda, gpu, bench). Usage: bench/stage_carry.sh BUILD_DIR
set -e
src=${1:-build-cuda}
if [ -d "$src/kernels/cuda" ]; then lib="$src/kernels/cuda"; tst="$src/tests/gpu"; else lib="$src/cuda"; tst="$src/gpu"; fi
rm -rf build-carry && mkdir -p build-carry/cuda build-carry/gpu build-carry/bench
cp "$lib"/libflashcheck_cuda_plugin.so build-carry/cuda/
[ -f "$tst"/test_cuda_attention ] && cp "$tst"/test_cuda_attention build-carry/gpu/
[ -f "$src"/bench/bench_fused_attention ] && cp "$src"/bench/bench_fused_attention build-carry/bench/
du -sh build-carry
