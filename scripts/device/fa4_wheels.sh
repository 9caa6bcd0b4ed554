#!/usr/bin/env bash
# FlashAttention's own Hopper kernel for the v2 benchmark (bench/sdpa_compare.py --fa4): the flash-attn-4
# package and what it needs that the H200 image lacks (the CuTe DSL and its runtime), as wheels for the
# image's Python 3.12. Run here (PyPI is reachable here, not there):
#   bash scripts/device/fa4_wheels.sh
# It fills .whl/fa4-a and .whl/fa4-b (git-ignored), each under the 64 MiB a device call may carry: the CuTe
# DSL's CUDA 13 library wheel (about 92 MB) is cut in two, one piece per folder. Then, while the machine
# stays warm between calls:
#   call 1, carry [".whl/fa4-a"]:  bash scripts/device/fa4_install.sh .whl/fa4-a
#   call 2, carry [".whl/fa4-b"]:  bash scripts/device/fa4_install.sh .whl/fa4-b   (installs into /tmp/fa4-site)
#   call 3, carry [".dev/flashcheck.tgz"]:  STEPS=v2_bench V2_BENCH_ARGS="... --fa4" bash scripts/device/h200_batch.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --pre \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp" "$@"
}
get flash-attn-4==4.0.0b36 quack-kernels==0.6.5 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
  nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5
rm -rf .whl/fa4-a .whl/fa4-b && mkdir -p .whl/fa4-a .whl/fa4-b
big=$(ls "$tmp"/nvidia_cutlass_dsl_libs_cu13-*.whl)
split -n 2 -d "$big" "$tmp/part."
mv "$tmp/part.00" ".whl/fa4-a/$(basename "$big").part00"
mv "$tmp/part.01" ".whl/fa4-b/$(basename "$big").part01"
rm "$big"
mv "$tmp"/*.whl .whl/fa4-b/
du -sh .whl/fa4-a .whl/fa4-b
