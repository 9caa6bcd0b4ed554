#!/usr/bin/env bash
# compute-sanitizer initcheck, judged report by report. The tool does not see memory that TMA stores write
# (bench/tma_store_probe), so every host copy of an O that kernel v2 stored that way is reported as a copy
# of uninitialised memory, and its error count says nothing about the kernels. This runs the tool with
# every report printed (no backtraces), counts the host copies (`on access by cudaMemcpy source`) apart
# from everything else it reports (a kernel reading global memory nothing wrote, an API error), prints both
# counts, and fails when there is any of the second kind or when the program itself fails.
#   scripts/device/initcheck_kernel_reads.sh PROGRAM [ARGS...]
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
# Without --error-exitcode the tool exits with the program's status.
compute-sanitizer --tool initcheck --print-limit 100000000 --show-backtrace no "$@" 2>&1 |
  awk -v out="$summary" '
    # A report is a header line ("========= " and a word) and indented lines under it.
    pending { pending = 0; if ($0 ~ /on access by cudaMemcpy source/) { copies++; skip = 1; next } others++; print held }
    /^========= Host API memory access error/ { pending = 1; held = $0; next }
    /^========= (COMPUTE-SANITIZER|ERROR SUMMARY|Target application returned)/ { skip = 0; print; next }
    /^========= [^ ]/ { others++; skip = 0; print; next }
    /^=========/ { if (!skip) print; next }
    { skip = 0; print }  # the program output
    END { printf "%d %d\n", copies, others > out }'
rc=${PIPESTATUS[0]}
read -r copies others <"$summary"
echo "initcheck: ${copies:-0} reports on host copies of memory the tool did not see written (TMA stores), ${others:-0} other reports; program exit $rc"
[ "$rc" -eq 0 ] && [ "${others:-1}" -eq 0 ]
