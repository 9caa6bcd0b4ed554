#!/usr/bin/env bash
# What a Hopper attention kernel costs to compile, by how it is written: the measurement behind kernel
# v2's library choice (docs/cuda-kernel.md, "Library choice for v2"). No GPU needed; it times nvcc for
# sm_90a on this machine, one translation unit at a time, and counts the kernels each one generates:
#
#   cute      CUTLASS's Hopper FMHA example (examples/88_hopper_fmha of the nvidia-cutlass wheel from
#             PyPI): CuTe, TMA, wgmma, warp specialisation; forward at d 32/64/128/256 and backward
#   v1        our kernel v1's d = 128 translation unit (mma.sync + cp.async, thin PTX wrappers)
#   thin-ptx  bench/tensor_core_probe.cu: wgmma and mma.sync through kernels/cuda/wgmma.h and mma.h
#
#   bash bench/compile_cost.sh [BUILD_DIR with FLASHCHECK_CUDA=ON (default build-h200)]
# Prints one markdown row per unit: seconds, kernels (all, and the attention kernels among them), seconds per
# attention kernel, peak memory of the compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-h200}
command -v nvcc >/dev/null || { echo "compile_cost: nvcc not found" >&2; exit 2; }
command -v cuobjdump >/dev/null || { echo "compile_cost: cuobjdump not found (pip install nvidia-cuda-cuobjdump-cu13, or the CUDA toolkit)" >&2; exit 2; }
[ -f "$build/kernels/cuda/fwd_hdim128.cu" ] || { echo "compile_cost: $build/kernels/cuda/fwd_hdim128.cu missing: configure $build with -DFLASHCHECK_CUDA=ON" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cutlass_version=4.2.0.0
python3 -m pip download "nvidia-cutlass==$cutlass_version" --no-deps -d "$tmp" -q
python3 - "$tmp" <<'EOF'
import glob, sys, zipfile
zipfile.ZipFile(glob.glob(sys.argv[1] + "/nvidia_cutlass-*.whl")[0]).extractall(sys.argv[1] + "/cutlass")
EOF
src=$tmp/cutlass/cutlass_library/source
gencode="-gencode=arch=compute_90a,code=sm_90a"

# unit NAME PATTERN COMMAND...: compiles with /usr/bin/time, prints the row; PATTERN picks the attention
# kernels among the unit's kernels (the example also builds fill and reference kernels).
unit() {
  local name=$1 pattern=$2
  shift 2
  local start end
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$tmp/$name.mem" "$@" -o "$tmp/$name.o" >"$tmp/$name.log" 2>&1 || {
    echo "compile_cost: $name failed:" >&2
    tail -20 "$tmp/$name.log" >&2
    exit 1
  }
  end=$(date +%s.%N)
  local kernels attention seconds mem
  kernels=$(cuobjdump -sass "$tmp/$name.o" | grep -c "Function :" || true)
  attention=$(cuobjdump -sass "$tmp/$name.o" | grep "Function :" | grep -cE "$pattern" || true)
  seconds=$(python3 -c "print(f'{$end - $start:.1f}')")
  mem=$(python3 -c "print(f'{$(tail -1 "$tmp/$name.mem") / 1048576:.2f}')")
  echo "| $name | $seconds | $kernels | $attention | $(python3 -c "print(f'{$seconds / max($attention, 1):.1f}')") | $mem |"
}

echo "nvcc: $(nvcc --version | tail -2 | head -1); $(nproc) cores; $(date -u +%Y-%m-%d); nvidia-cutlass $cutlass_version"
echo
echo "| unit | seconds | kernels | attention kernels | seconds per attention kernel | peak compiler memory (GiB) |"
echo "|---|---|---|---|---|---|"
unit cute "Fmha" nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr --use_fast_math $gencode -I"$src/include" \
  -I"$src/tools/util/include" -I"$src/examples/common" -I"$src/examples/88_hopper_fmha" \
  -c "$src/examples/88_hopper_fmha/88_hopper_fmha.cu"
unit v1 "fwd_kernel|fwd_redo_kernel" nvcc -std=c++17 -O3 -DNDEBUG $gencode --fmad=false -I. -Iinclude -Ikernels/cuda -c "$build/kernels/cuda/fwd_hdim128.cu"
unit thin-ptx "probe_kernel" nvcc -std=c++20 -O3 -DNDEBUG $gencode -I. -c bench/tensor_core_probe.cu
