#!/usr/bin/env bash
# Runs compute-sanitizer racecheck on a test binary built with a deliberate shared-memory race (the
# catalogue's FlashInfer #1046 entry, docs/known-bugs.md) and passes when racecheck reports at least one
# hazard: a missing barrier must not go unseen. The binary's own verdicts do not matter here (the race may
# or may not change the output on a given run). Exit 77 (ctest: skipped) without compute-sanitizer or a GPU.
#
#   expect_racecheck_hazards.sh BINARY [ARGS...]
set -uo pipefail
bin=$1
shift
san=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if [ ! -x "$san" ]; then
  echo "SKIPPED: compute-sanitizer not found"
  exit 77
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no GPU"
  exit 77
fi
out=$("$san" --tool racecheck "$bin" "$@" 2>&1)
echo "$out" | grep -E "RACECHECK SUMMARY|Race reported|hazard" | head -20
hazards=$(echo "$out" | grep -oE "RACECHECK SUMMARY: [0-9]+ hazard" | grep -oE "[0-9]+" | head -1)
if [ "${hazards:-0}" -gt 0 ]; then
  echo "expect_racecheck_hazards.sh: racecheck reported $hazards hazard(s), as it must"
  exit 0
fi
echo "$out" | tail -20
echo "expect_racecheck_hazards.sh: racecheck reported no hazard in a kernel built with a missing barrier"
exit 1
