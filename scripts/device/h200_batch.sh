#!/usr/bin/env bash
# The H200 verification batch, one device call: the GPU tests, the property suite on the CUDA subject,
# the sample report with the CUDA subject, PyTorch SDPA's verdict, the pytest example and a GPU fuzz
# campaign. Each step is time-boxed so that the whole fits one 600 s call; results go to $OUT/*.log and
# $OUT/results.tgz. Prepare here first:
#   bash scripts/device/prepare_carry.sh build-h200 build-h200
#   cp build-h200/tests/gpu/test_cuda_attention build-h200/tests/properties/property_cuda_test .dev/flashcheck/bin/
# and carry [".dev/flashcheck"]. FUZZ_SECONDS sets the fuzz campaign's length (default 90).
set -uo pipefail
cd "$(dirname "$0")/../.."
# At most 8 files come back from $OUT: everything is written under a scratch folder and returned as one
# archive plus the step summary.
final=${OUT:?OUT must name the folder that comes back}
export OUT=/tmp/flashcheck-h200
rm -rf "$OUT" && mkdir -p "$OUT"
source scripts/device/env.sh
bin=.dev/flashcheck/bin
res=$OUT/results
mkdir -p "$res"
step() {  # step NAME SECONDS COMMAND...: runs with a limit, logs, records the exit code
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$res/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc seconds=$((SECONDS - t0))" | tee -a "$OUT/steps.log"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/steps.log"
step gpu_tests 75 "$bin/test_cuda_attention"
step property_cuda 140 env RC_PARAMS="${RC_PARAMS:-max_success=100 seed=20261129}" "$bin/property_cuda_test"
step report 110 "$FLASHCHECK_EXE" report --subjects emulation,cuda --out "$res/h200-report" --progress lines
step sdpa_verdict 150 bash scripts/device/pytorch_sdpa_verdict.sh --out "$res/sdpa"
step pytest_example 45 bash scripts/device/pytest_example.sh
step gpu_fuzz $(( ${FUZZ_SECONDS:-90} + 30 )) "$FLASHCHECK_EXE" fuzz --subject cuda --seconds "${FUZZ_SECONDS:-90}" \
  --seed 1 --jobs 16 --out "$res/fuzz-findings"
tail -n 25 "$res"/*.log > "$final/tails.log" 2>&1
cp "$OUT/steps.log" "$final/"
tar -czf "$final/results.tgz" -C "$OUT" .
cat "$OUT/steps.log"
