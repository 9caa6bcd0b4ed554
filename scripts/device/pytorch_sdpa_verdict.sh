#!/usr/bin/env bash
# On the H200: PyTorch SDPA's flash, cuDNN and memory-efficient backends against flashcheck's error
# budget through the NPY route (flashcheck compare), bf16 and fp16, masks none and is_causal (top-left),
# boundary shapes; our CUDA kernel on the same inputs for scale. Writes into $OUT:
#   pytorch-sdpa-h200.md     the content of docs/reports/pytorch-sdpa-h200.md
#   pytorch-sdpa-h200.json   every case, every backend
#   sdpa_reproducers.npz     minimal reproducers of violations (only when there are any)
#   pytorch_sdpa_verdict.log the run's output
# One command (the lead's batch): carry [".dev/flashcheck"] after scripts/device/prepare_carry.sh, then
#   bash scripts/device/pytorch_sdpa_verdict.sh
# Expected runtime on one H200 with 16 cores: about 1 to 2 minutes (the float64 reference and the budget
# run on the CPU, 16 at a time); --quick halves the shapes.
set -euo pipefail
source "$(dirname "$0")/env.sh"
set -o pipefail
python3 "$root/scripts/device/pytorch_sdpa_verdict.py" --out "$OUT" "$@" 2>&1 | tee "$OUT/pytorch_sdpa_verdict.log"
