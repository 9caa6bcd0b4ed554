#!/usr/bin/env bash
# Run HERE (not on the device), before the device batch: packs what the device scripts need into
# .dev/flashcheck/ (ignored by git), to be named in the run's `carry`:
#   .dev/flashcheck/bin/flashcheck       the CLI (built here; the device image has no Eigen/MPFR/CLI11)
#   .dev/flashcheck/lib/*.so*            the non-glibc libraries it links (fmt, mpfr, gmp)
#   .dev/flashcheck/lib/libflashcheck_cuda_plugin.so   our CUDA kernel as a plugin, when built
#   .dev/flashcheck/python/flashcheck    the Python package
# Usage: bash scripts/device/prepare_carry.sh [CPU_BUILD_DIR (default build-plugin)] [CUDA_BUILD_DIR (default build-cuda)]
set -euo pipefail
cd "$(dirname "$0")/../.."
cpu_build=${1:-build-plugin}
cuda_build=${2:-build-cuda}
dest=.dev/flashcheck
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/python"
exe="$cpu_build/tools/flashcheck"
[ -x "$exe" ] || { echo "prepare_carry: $exe not built (cmake --build $cpu_build --target flashcheck)" >&2; exit 2; }
cp "$exe" "$dest/bin/"
# Every shared library it needs except the C runtime and libstdc++/libgcc (present on any image).
ldd "$exe" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) cp -L "$lib" "$dest/lib/" ;;
  esac
done
# Our fused kernel only (the naive baseline is not needed by these scripts; each is ~17 MB of the 64 MiB
# a run may carry).
if [ -f "$cuda_build/kernels/cuda/libflashcheck_cuda_plugin.so" ]; then
  cp "$cuda_build/kernels/cuda/libflashcheck_cuda_plugin.so" "$dest/lib/"
else
  echo "prepare_carry: no $cuda_build/kernels/cuda/libflashcheck_cuda_plugin.so: 'ours' will not run on the device" >&2
fi
cp -r python/flashcheck "$dest/python/"
find "$dest" -name __pycache__ -prune -exec rm -rf {} +
du -sh "$dest"
ls -l "$dest/bin" "$dest/lib"
echo "carry: [\".dev/flashcheck\"]"
