#!/bin/bash
# Correctness, sanitizers and SASS checks on the GPU machine (run from the repo root, with build-carry/
# staged by bench/stage_carry.sh). Logs go to $OUT.
set -u
OUT=${OUT:-/tmp/fc_out}; mkdir -p "$OUT"
cd build-carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/smi.txt"
echo "== tests"; ./gpu/test_cuda_attention --gtest_filter=-CudaSanitizer.* > "$OUT/tests.log" 2>&1; echo "rc=$?"
grep -E "FAILED|Failure|OK \] |PASSED|SKIPPED" "$OUT/tests.log" | head -40
for tool in memcheck racecheck initcheck synccheck; do
  echo "== compute-sanitizer $tool"
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout 170 compute-sanitizer --tool $tool $extra --error-exitcode 99 ./gpu/test_cuda_attention \
    --gtest_filter=CudaSanitizer.* > "$OUT/san_$tool.log" 2>&1; echo "rc=$?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|PASSED|FAILED" "$OUT/san_$tool.log" | head -5
done
echo "== SASS"; cuobjdump -sass cuda/libflashcheck_cuda_plugin.so > /tmp/sass.txt
echo "HMMA: $(grep -c HMMA /tmp/sass.txt)  fp8 QMMA: $(grep -c QMMA /tmp/sass.txt)  LDSM: $(grep -c LDSM /tmp/sass.txt)  LDGSTS: $(grep -c LDGSTS /tmp/sass.txt)  MUFU.EX2: $(grep -c 'MUFU.EX2' /tmp/sass.txt)"
grep -E "Function|HMMA|STL|LDL" /tmp/sass.txt | awk '/Function/{f=$0; next} /HMMA/{h[f]++} /STL|LDL/{l[f]++} END{for (k in h) if (k ~ /Fp16|Bf16/) printf "%s HMMA=%d LDL/STL=%d\n", k, h[k], l[k]+0}' | sed -E 's/.*FwdKernelTraitsINS0_4(\w+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELb([01]).*(HMMA.*)/\1 d\2 \3x\4x\5 \7/' | sort > "$OUT/sass_summary.txt"
head -40 "$OUT/sass_summary.txt"
if [ "${FC_BENCH:-0}" = 1 ]; then
  echo "== bench (C++): fp8 e5m2 + naive vs fused memory"
  ./bench/bench_fused_attention --recipes e5m2 --dims 64,128,256 --seqs 4096 --reps 10 --naive-memory > "$OUT/bench_cpp.txt" 2>&1; tail -20 "$OUT/bench_cpp.txt"
  echo "== sdpa_compare"
  PYTHONUNBUFFERED=1 timeout 400 python3 ../bench/sdpa_compare.py --plugin cuda/libflashcheck_cuda_plugin.so \
    --dims 64,128,256 --fp8 --warmup 10 --rep 40 --json "$OUT/sdpa.json" > "$OUT/sdpa.txt" 2>&1; echo "rc=$?"
  grep -E "^geomean" "$OUT/sdpa.txt"
fi
