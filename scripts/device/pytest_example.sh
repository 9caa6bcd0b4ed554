#!/usr/bin/env bash
# On the H200: runs the pytest example on PyTorch SDPA (python/examples/test_sdpa_example.py) and the
# Python package's own tests, with the carried flashcheck (scripts/device/prepare_carry.sh; carry
# [".dev/flashcheck"]). Writes $OUT/pytest_example.log and $OUT/pytest_example.xml. About 30 s.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$root"
set +e
python3 -m pytest -v -p no:cacheprovider --junitxml="$OUT/pytest_example.xml" python/examples/test_sdpa_example.py \
  python/tests 2>&1 | tee "$OUT/pytest_example.log"
rc=${PIPESTATUS[0]}
echo "pytest exit status: $rc" | tee -a "$OUT/pytest_example.log"
exit "$rc"
