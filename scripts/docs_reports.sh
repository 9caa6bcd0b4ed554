#!/usr/bin/env bash
# Regenerates the curated outputs under docs/reports/ (raw logs and per-run JSON stay out of the tree):
#
#   bash scripts/docs_reports.sh sample
#       the README's main command (`bash scripts/report.sh`) on this machine -> docs/reports/cpu-sample/
#       (report.md, summary.csv, the plots at a documentation size, and a README naming machine, date, commit)
#   bash scripts/docs_reports.sh throughput RUN.json "COMMAND" "MACHINE" "DATE"
#       one bench/sdpa_compare.py run's JSON (on the H200) -> docs/reports/throughput-h200.{md,png}
#   bash scripts/docs_reports.sh throughput-v2 RUN.json "COMMAND" "MACHINE" "DATE" [NAME=LABEL]
#       the same for kernel v2 (STEPS=v2_bench: v2 as ours, v1 as --ab) -> docs/reports/throughput-v2-h200.{md,png};
#       NAME=LABEL: the --ab column NAME is this tree's v2 and the run's --plugin column another build, shown as LABEL;
#       --about NAME=TEXT: a sentence on the page saying what the --ab column NAME is
#   bash scripts/docs_reports.sh pytorch DIR
#       scripts/device/pytorch_sdpa_verdict.sh's output folder (on the H200) -> docs/reports/pytorch-sdpa-h200.md
#   bash scripts/docs_reports.sh oracle-grid TABLE.md "MACHINE" "DATE" [v2]
#       `oracle_scale --grid --markdown TABLE.md` (on the H200) -> docs/reports/oracle-grid-h200.md, or with v2
#       (ORACLE_GRID_PLUGIN=...v2 plugin) -> docs/reports/oracle-grid-v2-h200.md
#
# Each writes into a temporary folder and moves the result into place only when complete.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=docs/reports
py=$(command -v /usr/bin/python3 || command -v python3)

case "${1:-}" in
  sample)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    start=$(date -u +%s)
    FLASHCHECK_PLOT_DPI=45 bash scripts/report.sh --out "$tmp/report" --progress lines
    seconds=$(( $(date -u +%s) - start ))
    mkdir -p "$tmp/cpu-sample/plots"
    cp "$tmp/report/report.md" "$tmp/report/summary.csv" "$tmp/cpu-sample/"
    cp "$tmp"/report/plots/*.png "$tmp/cpu-sample/plots/"
    cat >"$tmp/cpu-sample/README.md" <<EOF
# Sample report: the default campaign

[report.md](report.md) is the README's main command, \`bash scripts/report.sh\`, made on $(date -u +%Y-%m-%d) on
$(nproc) cores ($(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME"))$(command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && echo " with $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" || echo " without a GPU, so the only subject is the CPU emulation"), at commit
$(git rev-parse --short HEAD), in ${seconds} s including the build. \`bash scripts/docs_reports.sh sample\` regenerates this folder:
the report's own summary table and plots (rendered smaller here); its report.json and cases.csv are not kept in
the tree. docs/report-format.md explains every table, column and plot.
EOF
    rm -rf "$dest/cpu-sample.new" && mv "$tmp/cpu-sample" "$dest/cpu-sample.new"
    rm -rf "$dest/cpu-sample" && mv "$dest/cpu-sample.new" "$dest/cpu-sample"
    echo "docs_reports: wrote $dest/cpu-sample"
    ;;
  throughput)
    [ $# -eq 5 ] || { echo "usage: $0 throughput RUN.json COMMAND MACHINE DATE" >&2; exit 2; }
    "$py" bench/render_sdpa_compare.py "$2" "$dest/throughput-h200" --command "$3" --machine "$4" --date "$5"
    ;;
  throughput-v2)
    [ $# -ge 5 ] || { echo "usage: $0 throughput-v2 RUN.json COMMAND MACHINE DATE [NAME=LABEL] [--about NAME=TEXT ...]" >&2; exit 2; }
    ours=()
    if [ $# -ge 6 ] && [[ $6 != --* ]]; then ours=(--ours "$6"); set -- "${@:1:5}" "${@:7}"; fi
    "$py" bench/render_sdpa_compare.py "$2" "$dest/throughput-v2-h200" --command "$3" --machine "$4" --date "$5" \
      --mode throughput-v2 --title "Kernel v2 (ours) against cuDNN, PyTorch flash, FlashAttention 4 and kernel v1" \
      "${ours[@]}" "${@:6}"
    ;;
  pytorch)
    [ $# -eq 2 ] && [ -f "$2/pytorch-sdpa-h200.md" ] || { echo "usage: $0 pytorch DIR (with pytorch-sdpa-h200.md)" >&2; exit 2; }
    cp "$2/pytorch-sdpa-h200.md" "$dest/.pytorch-sdpa-h200.md.tmp"
    mv "$dest/.pytorch-sdpa-h200.md.tmp" "$dest/pytorch-sdpa-h200.md"
    echo "docs_reports: wrote $dest/pytorch-sdpa-h200.md"
    ;;
  oracle-grid)
    { [ $# -eq 4 ] || { [ $# -eq 5 ] && [ "$5" = v2 ]; }; } && [ -f "$2" ] ||
      { echo "usage: $0 oracle-grid TABLE.md MACHINE DATE [v2]" >&2; exit 2; }
    if [ "${5:-}" = v2 ]; then
      page=oracle-grid-v2-h200.md kernel="kernel v2" plugin=libflashcheck_cuda_v2_plugin.so
      env_note="ORACLE_GRID_PLUGIN=.dev/flashcheck/lib/$plugin ORACLE_GRID_RECIPES=fp16,bf16 "
      speed=throughput-v2-h200.md
    else
      page=oracle-grid-h200.md kernel="CUDA kernel" plugin=libflashcheck_cuda_plugin.so env_note=""
      speed=throughput-h200.md
    fi
    rows=$(grep -c '^| [a-z]' "$2" || true)
    {
      echo "# Our $kernel on the benchmark grid, judged by the GPU oracle"
      echo
      echo "Every shape of the benchmark grid (bench/sdpa_compare.py's: d 64/128/256, N 512 ... 16k, B = 16k/N,"
      echo "H = 2048/d, causal and not) for $((rows - 1)) shapes: our $kernel's output judged element by element against the"
      echo "error budget of the plan it reported, by the GPU oracle (docs/gpu-oracle.md). Inputs N(0,1) rounded once to"
      echo "the recipe's format (fp8: stored = value x 8), seed 1. \`kernel ms\` is one cold-started forward, not a"
      echo "benchmark (docs/reports/$speed has those); \`oracle s\` is the reference + budget + verdict"
      echo "device time. Made on $3 on $4 with"
      echo "\`oracle_scale --plugin $plugin --grid --markdown TABLE.md\` (run by"
      echo "\`${env_note}STEPS=oracle_grid bash scripts/device/h200_batch.sh\`); \`bash scripts/docs_reports.sh oracle-grid TABLE.md"
      echo "MACHINE DATE${5:+ $5}\` regenerates this page."
      echo
      cat "$2"
    } >"$dest/.$page.tmp"
    mv "$dest/.$page.tmp" "$dest/$page"
    echo "docs_reports: wrote $dest/$page"
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
