#!/usr/bin/env bash
# Run HERE (not on the device), before the device batch: packs what the device scripts need into
# .dev/flashcheck/ (ignored by git), to be named in the run's `carry`:
#   .dev/flashcheck/bin/flashcheck       the CLI (built here; the device image has no Eigen/MPFR/CLI11)
#   .dev/flashcheck/lib/*.so*            the non-glibc libraries it links (fmt, mpfr, gmp)
#   .dev/flashcheck/lib/libflashcheck_cuda{,_naive}_plugin.so   our CUDA kernels as plugins, when built
#   .dev/flashcheck/bin/{test_cuda_attention,property_cuda_test,cuda_regression_test,same_case_test,
#                        oracle_agreement_test,flashcheck-properties,bench_fused_attention,oracle_scale,tma_store_probe,
#                        knot_sums_rate,
#                        large_shape_test, test_cuda_attention_missing_wait (with -DFLASHCHECK_BUG_KERNELS=ON)}
#   .dev/flashcheck/lib/libflashcheck_example_cpu_plugin.so   the example plugin (same_case_test)
#   .dev/flashcheck/python/flashcheck    the Python package
# and packs the folder as .dev/flashcheck.tgz, which is what a run carries.
# Usage: [AB_PLUGIN=path.so] [AB_PLUGINS="NAME=path.so ..."] [AB_BENCH=path/bench_fused_attention] [CARRY_ONLY="name ..."] bash scripts/device/prepare_carry.sh [CPU_BUILD_DIR (default build-plugin)] [CUDA_BUILD_DIR (default build-cuda)]
# CARRY_ONLY keeps, of the test binaries, benches and plugins above, only those named (file names, e.g.
# "oracle_agreement_test oracle_scale libflashcheck_cuda_plugin.so"), so that a batch's carry stays under
# the 64 MiB a run may take; the CLI, its libraries and the Python package always go.
# (one build with -DFLASHCHECK_CUDA=ON serves as both: the CLI, the tests and the plugins)
set -euo pipefail
cd "$(dirname "$0")/../.."
cpu_build=${1:-build-plugin}
cuda_build=${2:-build-cuda}
dest=.dev/flashcheck
for spec in ${AB_PLUGINS:-}; do  # checked before the old carry is removed
  [[ $spec == ?*=?* && -f ${spec#*=} ]] || { echo "prepare_carry: AB_PLUGINS wants NAME=PATH of a file, got '$spec'" >&2; exit 2; }
done
rm -rf "$dest" "$dest.tgz"
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
# Whether CARRY_ONLY (if set) names file f.
wanted() { [ -z "${CARRY_ONLY:-}" ] || [[ " $CARRY_ONLY " == *" $(basename "$1") "* ]]; }
# Our kernels as plugins (v1 and v2; naive for its regression test), the GPU test binaries and the C++ bench,
# when built; AB_PLUGIN=PATH adds a second build of the fused plugin as lib/ab/ (bench/sdpa_compare.py --ab),
# and AB_PLUGINS="NAME=PATH ..." any number of builds as lib/ab/NAME.so (e.g. variants of v2 for V2_AB).
for f in kernels/cuda/libflashcheck_cuda_plugin.so kernels/cuda/libflashcheck_cuda_naive_plugin.so \
         kernels/cuda/libflashcheck_cuda_v2_plugin.so \
         kernels/plugin/libflashcheck_example_cpu_plugin.so; do
  wanted "$f" || continue
  if [ -f "$cuda_build/$f" ]; then cp "$cuda_build/$f" "$dest/lib/"; else echo "prepare_carry: no $cuda_build/$f" >&2; fi
done
for f in tests/gpu/test_cuda_attention tests/properties/property_cuda_test tests/properties/property_cuda_v2_test \
         tests/properties/cuda_regression_test \
         tests/cli/same_case_test tests/cli/cli_usage_test tests/gpu/oracle_agreement_test tests/gpu/large_shape_test tests/gpu/test_cuda_attention_missing_wait tools/flashcheck-properties \
         bench/bench_fused_attention bench/oracle_scale bench/tensor_core_probe \
         bench/tma_store_probe bench/knot_sums_rate; do
  wanted "$f" || continue
  if [ -x "$cuda_build/$f" ]; then cp "$cuda_build/$f" "$dest/bin/"; else echo "prepare_carry: no $cuda_build/$f" >&2; fi
done
if [ -n "${AB_PLUGIN:-}" ]; then mkdir -p "$dest/lib/ab" && cp "$AB_PLUGIN" "$dest/lib/ab/"; fi
for spec in ${AB_PLUGINS:-}; do
  mkdir -p "$dest/lib/ab" && cp "${spec#*=}" "$dest/lib/ab/${spec%%=*}.so"
done
if [ -n "${AB_BENCH:-}" ]; then mkdir -p "$dest/bin/ab" && cp "$AB_BENCH" "$dest/bin/ab/"; fi
cp -r python/flashcheck "$dest/python/"
find "$dest" -name __pycache__ -prune -exec rm -rf {} +
# The fatbins make the folder ~100 MB, over the 64 MiB a run may carry; compressed it is ~40 MB. The
# device scripts unpack it (scripts/device/env.sh).
tar -czf "$dest.tgz" -C "$(dirname "$dest")" "$(basename "$dest")"
du -sh "$dest" "$dest.tgz"
if [ "$(stat -c %s "$dest.tgz")" -gt $((64 << 20)) ]; then
  echo "prepare_carry: $dest.tgz is over the 64 MiB a run may carry; name what the batch needs in CARRY_ONLY" >&2
fi
ls -l "$dest/bin" "$dest/lib"
echo "carry: [\".dev/flashcheck.tgz\"]"
