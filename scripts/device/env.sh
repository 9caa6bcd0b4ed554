# Sourced by the device scripts: finds the flashcheck CLI, its libraries, our CUDA plugin and the Python
# package, from FLASHCHECK_EXE / FLASHCHECK_CUDA_PLUGIN if set, else the carried .dev/flashcheck
# (scripts/device/prepare_carry.sh), else a build tree.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
carried="$root/.dev/flashcheck"
# The carry is the packed folder (scripts/device/prepare_carry.sh); unpack it once per carried archive (a warm
# machine keeps the last call's folder: a new archive replaces it).
if [ -f "$carried.tgz" ]; then
  stamp=$(md5sum "$carried.tgz" | cut -d' ' -f1)
  if [ ! -f "$carried/.stamp" ] || [ "$(cat "$carried/.stamp")" != "$stamp" ]; then
    rm -rf "$carried" && tar -xzf "$carried.tgz" -C "$root/.dev" && echo "$stamp" >"$carried/.stamp"
  fi
fi
if [ -z "${FLASHCHECK_EXE:-}" ]; then
  for c in "$carried/bin/flashcheck" "$root"/build*/tools/flashcheck; do
    if [ -x "$c" ]; then FLASHCHECK_EXE=$c; break; fi
  done
fi
export FLASHCHECK_EXE
if [ -d "$carried/lib" ]; then export LD_LIBRARY_PATH="$carried/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
if [ -z "${FLASHCHECK_CUDA_PLUGIN:-}" ]; then
  for c in "$carried/lib/libflashcheck_cuda_plugin.so" "$root"/build*/kernels/cuda/libflashcheck_cuda_plugin.so; do
    if [ -f "$c" ]; then FLASHCHECK_CUDA_PLUGIN=$c; break; fi
  done
fi
export FLASHCHECK_CUDA_PLUGIN=${FLASHCHECK_CUDA_PLUGIN:-}
if [ -z "${FLASHCHECK_CUDA_NAIVE_PLUGIN:-}" ] && [ -f "$carried/lib/libflashcheck_cuda_naive_plugin.so" ]; then
  export FLASHCHECK_CUDA_NAIVE_PLUGIN="$carried/lib/libflashcheck_cuda_naive_plugin.so"
fi
if [ -z "${FLASHCHECK_CUDA_V2_PLUGIN:-}" ] && [ -f "$carried/lib/libflashcheck_cuda_v2_plugin.so" ]; then
  export FLASHCHECK_CUDA_V2_PLUGIN="$carried/lib/libflashcheck_cuda_v2_plugin.so"
fi
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export OUT=${OUT:-$root/out/device}
mkdir -p "$OUT"
if [ -z "${FLASHCHECK_EXE:-}" ] || ! "$FLASHCHECK_EXE" --help >/dev/null 2>&1; then
  echo "device: no runnable flashcheck (FLASHCHECK_EXE=${FLASHCHECK_EXE:-unset}); run scripts/device/prepare_carry.sh here and carry .dev/flashcheck" >&2
  [ -n "${FLASHCHECK_EXE:-}" ] && ldd "$FLASHCHECK_EXE" >&2 || true
  exit 2
fi
