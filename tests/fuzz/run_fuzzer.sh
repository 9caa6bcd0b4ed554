#!/usr/bin/env bash
# Builds the libFuzzer target (clang, -fsanitize=fuzzer,address,undefined; tests/fuzz/standalone) and
# runs it for a fixed time. docs/fuzzing.md.
#
#   run_fuzzer.sh [--build DIR] [--seconds N] [--bug NAME] [--empty-corpus] [--expect-finding]
#                 [--artifacts DIR] [--jobs N] [--build-only] [-- libFuzzer flags...]
#
#   default            the committed corpus (tests/corpus, read only) plus new inputs in a temp dir,
#                      N seconds (default 60); exit 0 with no finding, 1 on any finding (the crash file
#                      and its readable case are kept under the artifacts dir)
#   --bug NAME         run the emulation with DeliberateBug NAME (e.g. tail_not_masked)
#   --empty-corpus     start from nothing (no committed corpus)
#   --no-lse           check O only (as for a subject without LSE): a harder hunt for planted bugs
#   --expect-finding   the planted-bug hunt: exit 0 when a finding comes within N seconds (printing the
#                      time it took and the readable case), 1 when none does
# Exit 77 (ctest: skipped) when clang or libFuzzer is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FC_FUZZ_BUILD_DIR:-$root/build-libfuzzer}
seconds=60
bug=""
empty=0
expect=0
artifacts=""
jobs=${FLASHCHECK_JOBS:-2}
build_only=0
no_lse=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --bug) bug=$2; shift 2 ;;
    --empty-corpus) empty=1; shift ;;
    --no-lse) no_lse=1; shift ;;
    --expect-finding) expect=1; shift ;;
    --artifacts) artifacts=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run_fuzzer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# Without clang / libFuzzer: skip (77). The build-only step (a ctest fixture) exits 0 instead, so that
# the tests needing it report themselves as skipped rather than "not run".
skip_code=77
[ "$build_only" = 1 ] && skip_code=0
cxx=${FC_FUZZ_CXX:-$(command -v clang++ || command -v clang++-14 || true)}
if [ -z "$cxx" ]; then
  echo "SKIPPED: clang++ not found (scripts/setup.sh installs clang and libclang-rt-14-dev)"
  exit $skip_code
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     "$cxx" -x c++ -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
  echo "SKIPPED: $cxx cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)"
  exit $skip_code
fi

# Build (incremental: a second run only rebuilds what changed).
t0=$(date +%s.%N)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root/tests/fuzz/standalone" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
fi
nice cmake --build "$build" -j"$jobs" >"$build/build.log" 2>&1 || { cat "$build/build.log"; echo "run_fuzzer.sh: build failed"; exit 1; }
t1=$(date +%s.%N)
printf 'run_fuzzer.sh: attention_fuzzer built in %.0f s (%s)\n' "$(awk "BEGIN{print $t1 - $t0}")" "$build"
[ "$build_only" = 1 ] && exit 0

work=$(mktemp -d "${TMPDIR:-/tmp}/fc-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/new"
artifacts=${artifacts:-$build/artifacts}
mkdir -p "$artifacts"
corpora=("$work/new")
[ "$empty" = 0 ] && corpora+=("$root/tests/corpus")

export FC_FUZZ_BUG="$bug"
export FC_FUZZ_NO_LSE="$no_lse"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "run_fuzzer.sh: ${seconds} s, subject emulation${bug:+ with bug $bug}$([ "$no_lse" = 1 ] && echo ", O only"), corpus: ${corpora[*]}"
start=$(date +%s.%N)
set +e
"$build/attention_fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 -max_len=4096 \
  -error_exitcode=3 -timeout_exitcode=4 -print_final_stats=1 -artifact_prefix="$work/" \
  "${extra[@]}" "${corpora[@]}" >"$work/log" 2>&1
rc=$?
set -e
end=$(date +%s.%N)
elapsed=$(awk "BEGIN{print $end - $start}")
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || true)
[ -z "$execs" ] && execs=$(grep -o '^#[0-9]*' "$work/log" | tail -1 | tr -d '#' || true)
crash=$(ls "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-* 2>/dev/null | head -1 || true)

if [ -n "$crash" ]; then
  cp "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-* "$artifacts"/ 2>/dev/null || true
  kept="$artifacts/$(basename "$crash")"
  # The readable case and the ready-to-paste regression test, from the reproducer.
  FC_FUZZ_EXPLAIN=1 "$build/attention_fuzzer" "$kept" >"$kept.txt" 2>&1 || true
  printf 'run_fuzzer.sh: FINDING after %.1f s (%s executions): %s\n' "$elapsed" "${execs:-?}" "$kept"
  grep -E 'ERROR|SUMMARY|runtime error' "$work/log" | head -5 || true
  sed -n '/==== flashcheck fuzz case/,/^---- regression test/p' "$kept.txt" | head -60
  echo "run_fuzzer.sh: readable case and regression test: $kept.txt"
  if [ "$expect" = 1 ]; then
    printf 'run_fuzzer.sh: planted bug %s found in %.1f s\n' "${bug:-none}" "$elapsed"
    exit 0
  fi
  exit 1
fi
if [ "$rc" != 0 ]; then
  tail -40 "$work/log"
  echo "run_fuzzer.sh: the fuzzer exited with $rc and left no reproducer"
  exit 1
fi
printf 'run_fuzzer.sh: %.1f s, %s executions, %s new corpus inputs, no findings\n' "$elapsed" "${execs:-?}" \
  "$(ls "$work/new" | wc -l)"
grep -E '^stat::' "$work/log" || true
if [ "$expect" = 1 ]; then
  echo "run_fuzzer.sh: planted bug ${bug:-none} NOT found within ${seconds} s"
  exit 1
fi
exit 0
