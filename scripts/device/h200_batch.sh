#!/usr/bin/env bash
# The H200 verification batch, one device call: the GPU tests, the property suite on the CUDA subject,
# the sample report with the CUDA subject, PyTorch SDPA's verdict, the pytest example, a GPU fuzz campaign,
# compute-sanitizer and the same-process benchmark against PyTorch SDPA. Each step is time-boxed; pick the
# steps that fit one 600 s call with STEPS (default: gpu_tests,regression,property_cuda,report,sdpa_verdict,
# pytest_example,gpu_fuzz; also: same_case, plugin_suite, sanitizers, bench, fp8, fp8_ab, oracle_agreement, oracle_sanitizers,
# oracle_scale, oracle_grid, oracle_cli, oracle_profile, torch_f64, dram, ncu_profile, missing_wait, guards, tensor_cores, large_shapes, large_fuzz,
# v2, v2_sanitizers, tma_store_probe, v2_bench, v2_timeline, knot_sums). Results: $OUT/results.tgz, $OUT/steps.log.
# Prepare here first (one CUDA build serves for everything):
#   cmake -S . -B build-h200 -DFLASHCHECK_CUDA=ON -DFLASHCHECK_PROOFS=OFF -DFLASHCHECK_FUZZ=OFF
#   cmake --build build-h200 -j2 --target flashcheck flashcheck_cuda_plugin flashcheck_cuda_v2_plugin flashcheck_cuda_naive_plugin \
#     test_cuda_attention property_cuda_test property_cuda_v2_test cuda_regression_test same_case_test flashcheck_property_runner \
#     flashcheck_example_cpu_plugin bench_fused_attention
#   [AB_PLUGIN=other/libflashcheck_cuda_plugin.so] bash scripts/device/prepare_carry.sh build-h200 build-h200
# and carry [".dev/flashcheck.tgz"]. FUZZ_SECONDS and FUZZ_SEED set the fuzz campaign (default 90 s, seed 1); BENCH_ARGS replaces the
# benchmark's shape arguments (default --dims 64,128,256); FP8_ERROR_N the fp8 error table's N list;
# PROFILE_SHAPES the ncu_profile step's shapes (dtype:d:N:causal ...) and PROFILE_PLUGIN its plugin (default v1;
# .dev/flashcheck/lib/libflashcheck_cuda_v2_plugin.so for v2); PROFILE_FA4=1 adds flash-attn-4's kernel.
set -uo pipefail
cd "$(dirname "$0")/../.."
# At most 8 files come back from $OUT: everything is written under a scratch folder and returned as one
# archive plus the step summary.
final=${OUT:?OUT must name the folder that comes back}
export OUT=/tmp/flashcheck-h200
rm -rf "$OUT" && mkdir -p "$OUT"
source scripts/device/env.sh
# flash-attn-4, when scripts/device/fa4_install.sh put it there in an earlier call (bench/sdpa_compare.py --fa4).
# The CuTe DSL's `cutlass` module lives under nvidia_cutlass_dsl/dsl_packages, which its wheel adds to sys.path
# with a .pth file; Python reads .pth files only in site directories, not on PYTHONPATH, so it is named here.
[ -d /tmp/fa4-site ] && export PYTHONPATH="/tmp/fa4-site:/tmp/fa4-site/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH"
bin=.dev/flashcheck/bin
res=$OUT/results
mkdir -p "$res"
# No step runs past DEADLINE seconds (default 560: the call's 600 s limit minus packing), so that the
# results always come back: a step's limit is cut to the time left (the log says so, and a step stopped
# there shows rc=124), and a step with less than 20 s left is skipped and says so.
deadline=${DEADLINE:-560}
step() {  # step NAME SECONDS COMMAND...: runs with a limit, logs, records the exit code
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS))
  if (( left < 20 )); then
    echo "$name SKIPPED: ${left}s left before the deadline (${deadline}s)" | tee -a "$OUT/steps.log"
    return
  fi
  if (( limit > left )); then
    echo "$name: limit cut from ${limit}s to the ${left}s left" | tee -a "$OUT/steps.log"
    limit=$left
  fi
  local t0=$SECONDS
  timeout "$limit" "$@" >"$res/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc seconds=$((SECONDS - t0))" | tee -a "$OUT/steps.log"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/steps.log"
steps=",${STEPS:-gpu_tests,regression,property_cuda,report,sdpa_verdict,pytest_example,gpu_fuzz},"
want() { [[ $steps == *",$1,"* ]]; }
want gpu_tests && step gpu_tests 90 "$bin/test_cuda_attention"
want regression && step regression 180 "$bin/cuda_regression_test"
want same_case && step same_case 90 env FC_EXAMPLE_CPU_PLUGIN=.dev/flashcheck/lib/libflashcheck_example_cpu_plugin.so \
  "$bin/same_case_test"
want property_cuda && step property_cuda 150 env RC_PARAMS="${RC_PARAMS:-max_success=100 seed=20261129}" "$bin/property_cuda_test"
want property_cuda && step property_cuda_v2 150 env RC_PARAMS="${RC_PARAMS:-max_success=100 seed=20261129}" \
  "$bin/property_cuda_v2_test"
if want plugin_suite; then
  # The plugin issue's check, as ctest -L gpu registers it (cmake/flashcheckKernelTests.cmake): the packaged
  # property runner on each of our plugins, through the C ABI only.
  lib=.dev/flashcheck/lib
  step cuda_plugin_properties 90 "$bin/flashcheck-properties" --plugin "$lib/libflashcheck_cuda_plugin.so" --cases 30 \
    --fuzz-cases 200 --require-gpu --gtest_filter='properties.*'
  step cuda_plugin_fuzz 90 "$bin/flashcheck-properties" --plugin "$lib/libflashcheck_cuda_plugin.so" --cases 30 \
    --fuzz-cases 200 --require-gpu --gtest_filter='fuzz.*'
  step cuda_naive_plugin_properties 90 "$bin/flashcheck-properties" --plugin "$lib/libflashcheck_cuda_naive_plugin.so" \
    --cases 15 --fuzz-cases 0 --require-gpu --gtest_filter='properties.*'
fi
if want v2; then
  # Kernel v2 (libflashcheck_cuda_v2_plugin.so) through the C ABI: the property suite and the tile-boundary
  # fuzzer of the packaged runner, then compute-sanitizer's four tools on a short run of the same suite
  # (ragged tails, every mask, GQA, key lengths, split-KV come from the generators).
  lib=.dev/flashcheck/lib
  step v2_properties 120 "$bin/flashcheck-properties" --plugin "$lib/libflashcheck_cuda_v2_plugin.so" \
    --cases "${V2_CASES:-60}" --fuzz-cases 0 --require-gpu --gtest_filter='properties.*'
  step v2_fuzz 90 "$bin/flashcheck-properties" --plugin "$lib/libflashcheck_cuda_v2_plugin.so" --cases 30 \
    --fuzz-cases "${V2_FUZZ_CASES:-300}" --require-gpu --gtest_filter='fuzz.*'
fi
if want v2_sanitizers; then
  lib=.dev/flashcheck/lib
  for tool in memcheck racecheck initcheck synccheck; do
    # initcheck reports every host copy of an O that TMA stores wrote (it does not see those stores), so its
    # runs count those apart and fail on any other report (scripts/device/initcheck_kernel_reads.sh).
    san=(compute-sanitizer --tool $tool --error-exitcode 99)
    [ $tool = initcheck ] && san=(bash scripts/device/initcheck_kernel_reads.sh)
    step "v2_san_$tool" 90 "${san[@]}" "$bin/flashcheck-properties" \
      --plugin "$lib/libflashcheck_cuda_v2_plugin.so" --cases 4 --fuzz-cases 20 --require-gpu
    # The 192-row tile, whose three consumer warpgroups take turns at named barriers, on ragged shapes of
    # every mask (the properties' small cases run the 128-row tile).
    step "v2_tall_san_$tool" 120 "${san[@]}" "$bin/test_cuda_attention" \
      --gtest_filter='CudaV2.TallTileIsTheShortTileBitForBit'
  done
fi
if want tma_store_probe; then
  # Whether compute-sanitizer's initcheck sees memory written by TMA stores (bench/tma_store_probe.cu): the
  # probe alone, then under initcheck.
  step tma_store_probe 60 "$bin/tma_store_probe"
  step tma_store_probe_initcheck 60 compute-sanitizer --tool initcheck --error-exitcode 99 "$bin/tma_store_probe"
  # The v2 sanitizer steps' initcheck filter: the probe's host copies alone pass it, and a kernel's read of
  # memory nothing wrote (--read-unwritten) must fail it, as one report of the other kind.
  step initcheck_filter 60 bash scripts/device/initcheck_kernel_reads.sh "$bin/tma_store_probe"
  step initcheck_filter_control 60 bash -c 'out=$(bash scripts/device/initcheck_kernel_reads.sh "$0" --read-unwritten 2>&1)
    printf "%s\n" "$out"; printf "%s\n" "$out" | grep -Eq "^initcheck: [0-9]+ reports on host copies.*, [1-9][0-9]* other reports; program exit 0$"' \
    "$bin/tma_store_probe"
fi
if want v2_bench; then
  # v2 against cuDNN, PyTorch flash and v1 in one process (the FA-3 grid; V2_BENCH_ARGS narrows it;
  # V2_AB="NAME=PATH ..." adds other builds of v2, e.g. A/B variants carried as lib/ab/NAME.so with AB_PLUGINS;
  # V2_BENCH_LIMIT raises its 400 s limit, e.g. for --fa4, whose kernels compile on first use).
  # v1 is timed beside them when its plugin was carried (an A/B carry may leave it out to make room).
  v2_ab=()
  [ -n "$FLASHCHECK_CUDA_PLUGIN" ] && v2_ab+=(--ab v1="$FLASHCHECK_CUDA_PLUGIN")
  for spec in ${V2_AB:-}; do v2_ab+=(--ab "$spec"); done
  step v2_bench "${V2_BENCH_LIMIT:-400}" python3 bench/sdpa_compare.py --plugin .dev/flashcheck/lib/libflashcheck_cuda_v2_plugin.so \
    "${v2_ab[@]}" ${V2_BENCH_ARGS:---dims 64,128,256} --warmup 10 --rep 40 \
    --json "$res/v2_compare.json"
fi
if want v2_timeline; then
  # Where v2's key steps spend their clocks (bench/v2_timeline.py): TIMELINE_PLUGIN is a v2 built with
  # -DFC_V2_TIMELINE (carried, e.g. as lib/ab/timeline.so with AB_PLUGINS), timed beside the carried v2.
  step v2_timeline 150 python3 bench/v2_timeline.py --plugin "${TIMELINE_PLUGIN:?TIMELINE_PLUGIN names the timeline build}" \
    --base .dev/flashcheck/lib/libflashcheck_cuda_v2_plugin.so \
    --shapes ${TIMELINE_SHAPES:-bf16:128:16384:0 bf16:128:16384:1 bf16:64:16384:0 bf16:128:1024:0}
fi
if want sanitizers; then
  # The kernels' sanitizer shapes (ragged tails, every mask, split-KV, naive) and the V NaN guard's
  # regression tests (boundary tiles with a NaN: shared-memory rewrites between barriers; a NaN query row:
  # the redo of a warp whose m-tiles share an l accumulator).
  for tool in memcheck racecheck initcheck synccheck; do
    extra=""; [ $tool = memcheck ] && extra="--leak-check full"
    step "san_$tool" 60 compute-sanitizer --tool $tool $extra --error-exitcode 99 "$bin/test_cuda_attention" \
      --gtest_filter='CudaSanitizer.*:CudaFused.TinyAndEmpty'
    step "san_nan_$tool" 60 compute-sanitizer --tool $tool --error-exitcode 99 "$bin/cuda_regression_test" \
      --gtest_filter='CudaRegression.NaNValueReachesOnlyRowsThatSeeItsKey:CudaRegression.NaNQueryRowStaysInItsRow'
  done
fi
if want missing_wait && [ -x "$bin/test_cuda_attention_missing_wait" ]; then
  # The catalogue's device-only bug (docs/known-bugs.md, FlashInfer #1046): racecheck must report hazards
  # on the kernel built without the barrier that publishes each key tile (-DFLASHCHECK_BUG_KERNELS=ON).
  step missing_wait 120 bash tests/gpu/expect_racecheck_hazards.sh "$bin/test_cuda_attention_missing_wait" \
    --gtest_filter='CudaSanitizer.*'
fi
if want tensor_cores; then
  # How mma.sync and wgmma accumulate, fitted bit for bit to the block-FMA model (docs/error-analysis.md §1).
  step tensor_core_probe 120 "$bin/tensor_core_probe" --tiles-per-family "${PROBE_TILES:-64}"
fi
if want guards; then
  # The device-memory guard: a split-KV workspace larger than the GPU (256 splits of O in fp32, 275 GB)
  # must be refused with exit 2 and the size, before anything is allocated; and the same case with the
  # subject in a worker, where the worker's own context reports running out.
  step guard_device 30 bash -c '"$0" check --subject cuda --recipe bf16 --n 65536 --heads-q 32 --d 128 \
    --num-splits 256 --isolation in-process; rc=$?; echo "exit $rc"; [ $rc = 2 ]' "$FLASHCHECK_EXE"
  step guard_device_worker 60 bash -c '"$0" check --subject cuda --recipe bf16 --n 65536 --heads-q 32 --d 128 \
    --num-splits 256 --isolation worker; rc=$?; echo "exit $rc"; [ $rc = 2 ]' "$FLASHCHECK_EXE"
fi
if want bench; then
  ab=""
  [ -f .dev/flashcheck/lib/ab/libflashcheck_cuda_plugin.so ] && ab="--ab ${AB_NAME:-unguarded}=.dev/flashcheck/lib/ab/libflashcheck_cuda_plugin.so"
  step bench 240 python3 bench/sdpa_compare.py --plugin "$FLASHCHECK_CUDA_PLUGIN" ${BENCH_ARGS:---dims 64,128,256} --warmup 10 --rep 40 \
    $ab --json "$res/sdpa_compare.json"
fi
if want fp8; then
  # fp8 with and without two-level accumulation: error against the budget as N grows, and throughput.
  # ${FP8_ERROR_N}: the float64 reference of an N = 4096 case takes about a minute on the device's CPU; at
  # 150 s the default list stopped after 10 of 24 rows (2026-11-29), so e5m2 comes first here. The whole
  # table took 215 s once and passed 240 s the next time (22 of 24 rows), hence 330.
  step fp8_errors 330 python3 bench/fp8_two_level_errors.py --flashcheck "$FLASHCHECK_EXE" --subject cuda \
    --recipes fp8_e5m2,fp8_e4m3 --n "${FP8_ERROR_N:-512,2048,4096}" --json "$res/fp8_two_level_errors.json"
  step fp8_tflops 60 "$bin/bench_fused_attention" --recipes e4m3,e5m2 --dims 64,128,256 --seqs 1024,4096,16384 --reps 10
  step fp8_tflops_two_level 60 "$bin/bench_fused_attention" --recipes e4m3,e5m2 --dims 64,128,256 \
    --seqs 1024,4096,16384 --reps 10 --flags 2
fi
want oracle_agreement && step oracle_agreement "${ORACLE_AGREEMENT_SECONDS:-240}" "$bin/oracle_agreement_test"
# compute-sanitizer on the oracle's kernels over a prefix of the agreement test's problems (ORACLE_SANITIZER_CASES,
# default 80): memcheck there and on the pass comparison (3 s), racecheck there alone (80 problems: about 60 s),
# initcheck and synccheck there (the budget's weights copied ahead by cp.async, its barriers).
if want oracle_sanitizers; then
  step oracle_san_memcheck 150 env FC_ORACLE_AGREEMENT_CASES="${ORACLE_SANITIZER_CASES:-80}" compute-sanitizer \
    --tool memcheck --error-exitcode 1 "$bin/oracle_agreement_test" \
    --gtest_filter='OracleAgreement.GpuReference*:OracleAgreement.PassesDoNotChangeTheResult:OracleAgreement.RowForm*:OracleAgreement.KnotForm*'
  step oracle_san_racecheck 150 env FC_ORACLE_AGREEMENT_CASES="${ORACLE_SANITIZER_CASES:-80}" compute-sanitizer \
    --tool racecheck --error-exitcode 1 "$bin/oracle_agreement_test" --gtest_filter='OracleAgreement.GpuReference*'
  # initcheck without the agreement test's poisoned workspace: a read of what no kernel wrote is then
  # uninitialised, which initcheck reports, rather than poisoned.
  for tool in initcheck synccheck; do
    step "oracle_san_$tool" 150 env FC_ORACLE_AGREEMENT_CASES="${ORACLE_SANITIZER_CASES:-80}" \
      FLASHCHECK_ORACLE_POISON=0 compute-sanitizer --tool $tool --error-exitcode 1 "$bin/oracle_agreement_test" \
      --gtest_filter='OracleAgreement.GpuReference*:OracleAgreement.RowForm*:OracleAgreement.KnotForm*'
  done
fi
if want oracle_scale; then
  # Our kernel judged by the GPU oracle at production shapes (ORACLE_SHAPES: B:H:N:d:recipe:causal[:NK] ...).
  # ORACLE_AB_ENV="VAR=VALUE ...": each shape also runs under that environment, right after (e.g.
  # FLASHCHECK_ORACLE_SCORE_KERNEL=0 to time the oracle without its score kernel in the same call).
  for shape in ${ORACLE_SHAPES:-1:16:16384:128:bf16:0}; do
    step "oracle_${shape//:/_}" "${ORACLE_SECONDS:-300}" "$bin/oracle_scale" --plugin "$FLASHCHECK_CUDA_PLUGIN" \
      --shape "$shape"
    [ -n "${ORACLE_AB_ENV:-}" ] && step "oracle_ab_${shape//:/_}" "${ORACLE_SECONDS:-300}" env $ORACLE_AB_ENV \
      "$bin/oracle_scale" --plugin "$FLASHCHECK_CUDA_PLUGIN" --shape "$shape"
  done
fi
if want large_shapes; then
  # The generators' large-shape mode on our kernel, judged on the device (LARGE_CASES cases, LARGE_SEED).
  step large_shapes "${LARGE_SECONDS:-240}" env FLASHCHECK_LARGE_CASES="${LARGE_CASES:-8}" \
    FLASHCHECK_LARGE_SEED="${LARGE_SEED:-1}" "$bin/large_shape_test"
fi
if want large_fuzz; then
  # fuzz --large: the large-shape mode as a campaign on our kernel in this process (LARGE_FUZZ_SECONDS).
  step large_fuzz $(( ${LARGE_FUZZ_SECONDS:-60} + 30 )) "$FLASHCHECK_EXE" fuzz --subject cuda --large \
    --seconds "${LARGE_FUZZ_SECONDS:-60}" --seed "${LARGE_SEED:-1}"
fi
if want oracle_cli; then
  # The commands judged by the GPU oracle (--oracle gpu): the CLI test's GPU branch, one case, the default
  # report, the plugin property suite and a short fuzz run.
  step oracle_cli_test 20 env FLASHCHECK_EXE="$FLASHCHECK_EXE" "$bin/cli_usage_test" \
    --gtest_filter='CliUsage.OracleFlagIsCheckedAndReported'
  step oracle_check 30 "$FLASHCHECK_EXE" check --subject cuda --recipe bf16 --n 4096 --d 128 --mask causal --oracle gpu
  step oracle_report 60 "$FLASHCHECK_EXE" report --subjects emulation,cuda --oracle gpu --out "$res/oracle-report" \
    --progress lines --no-plots
  step oracle_properties 45 "$bin/flashcheck-properties" --plugin .dev/flashcheck/lib/libflashcheck_cuda_plugin.so \
    --cases 10 --fuzz-cases 40 --require-gpu --oracle gpu
  step oracle_fuzz 30 "$FLASHCHECK_EXE" fuzz --subject cuda --seconds 15 --seed 8 --jobs 16 --oracle gpu \
    --out "$res/oracle-fuzz"
fi
if want oracle_grid; then
  # Every shape of the benchmark grid judged by the GPU oracle (ORACLE_GRID_RECIPES), one table; the
  # subject is v1 unless ORACLE_GRID_PLUGIN names another (e.g. lib/libflashcheck_cuda_v2_plugin.so).
  step oracle_grid "${ORACLE_GRID_SECONDS:-400}" "$bin/oracle_scale" --plugin "${ORACLE_GRID_PLUGIN:-$FLASHCHECK_CUDA_PLUGIN}" --grid \
    --recipes "${ORACLE_GRID_RECIPES:-fp16,bf16,e4m3,e5m2}" --markdown "$res/oracle_grid.md"
fi
if want knot_sums; then
  # The budget's sums through knots on the fp16 tensor cores (bench/knot_sums_rate.cu, docs/gpu-oracle.md):
  # KNOT_CASES sd:heavy ... at (1, 16, 16k, 128), then N = 4096 with 4 heads.
  for c in ${KNOT_CASES:-1:0 1:32 2:0 2:32 3:0 3:32 3:128}; do
    step "knot_sums_sd${c%%:*}_heavy${c##*:}" 120 "$bin/knot_sums_rate" --n 16384 --heads 16 --check 256 \
      --sd "${c%%:*}" --heavy "${c##*:}"
  done
  for sd in 1 2; do
    step "knot_sums_sd${sd}_tol1e-2" 120 "$bin/knot_sums_rate" --n 16384 --heads 16 --check 256 --sd "$sd" --tol 1e-2
  done
  for h in 0 32; do
    step "knot_sums_n4096_heavy$h" 120 "$bin/knot_sums_rate" --n 4096 --heads 4 --check 256 --heavy "$h"
  done
fi
if want torch_f64; then
  # PyTorch's float64 math SDPA on the oracle's shapes (TORCH_F64_SHAPES: B:H:N:d:causal), for comparison.
  for shape in ${TORCH_F64_SHAPES:-1:16:16384:128:0}; do
    IFS=: read -r tb th tn td tc <<<"$shape"
    cflag=""; [ "$tc" = 1 ] && cflag="--causal"
    step "torch_f64_${tb}_${th}_${tn}_${td}_c${tc}" 120 python3 bench/torch_f64_reference.py --b "$tb" --h "$th" \
      --n "$tn" --d "$td" $cflag
  done
fi
if want oracle_profile; then
  # Nsight Compute on the GPU oracle's four big kernels (score, tiled reference, budget weights and sums) at
  # a small shape (B=1 H=4 N=4096 d=128 bf16): details and per-instruction SASS counts come back as text.
  step oracle_ncu 180 ncu --clock-control none --set full --import-source no \
    -k regex:"score_kernel|reference_tiled_kernel|budget_kernel|budget_sums_kernel" \
    -c 6 -f -o "$res/prof_oracle" "$bin/oracle_scale" --plugin "$FLASHCHECK_CUDA_PLUGIN" --b 1 --h 4 --n 4096 --d 128 \
    --recipe bf16
  if [ -f "$res/prof_oracle.ncu-rep" ]; then
    ncu -i "$res/prof_oracle.ncu-rep" --page details --print-details all >"$res/ncu_details_oracle.txt" 2>&1
    ncu -i "$res/prof_oracle.ncu-rep" --page source --csv --print-source sass >"$res/ncu_sass_oracle.csv" 2>&1
    rm -f "$res/prof_oracle.ncu-rep"
  fi
fi
if want fp8_ab && [ -x "$bin/ab/bench_fused_attention" ]; then
  # fp8 throughput of this build against another (AB_BENCH=path in prepare_carry.sh: bin/ab/), in the
  # order new, old, old, new, so that neither build always runs first.
  for r in new1 old1 old2 new2; do
    b="$bin/bench_fused_attention"; [[ $r == old* ]] && b="$bin/ab/bench_fused_attention"
    step "fp8_ab_$r" 60 "$b" --recipes e4m3,e5m2 --dims 64,128,256 --seqs 1024,4096,16384 --reps 10
  done
fi
if want ncu_profile; then
  # Nsight Compute on one forward of ours, flash and cuDNN per shape (PROFILE_SHAPES: dtype:d:N:causal),
  # full section set; details, raw metrics and per-instruction SASS counts come back as text.
  for shape in ${PROFILE_SHAPES:-bf16:64:4096:0 bf16:128:4096:0 bf16:256:4096:0 bf16:128:4096:1}; do
    IFS=: read -r pdt pd pn pc <<<"$shape"
    tag="${pdt}_d${pd}_n${pn}_c${pc}"
    cflag=""; [ "$pc" = 1 ] && cflag="--causal"
    step "ncu_$tag" 120 ncu --clock-control none --profile-from-start off --set full --import-source no -f \
      -o "$res/prof_$tag" python3 bench/ncu_profile.py --plugin "${PROFILE_PLUGIN:-$FLASHCHECK_CUDA_PLUGIN}" --dtype "$pdt" --d "$pd" \
      --n "$pn" $cflag ${PROFILE_FA4:+--fa4}
    if [ -f "$res/prof_$tag.ncu-rep" ]; then
      ncu -i "$res/prof_$tag.ncu-rep" --page details --print-details all >"$res/ncu_details_$tag.txt" 2>&1
      ncu -i "$res/prof_$tag.ncu-rep" --page raw --csv >"$res/ncu_raw_$tag.csv" 2>&1
      ncu -i "$res/prof_$tag.ncu-rep" --page source --csv --print-source sass >"$res/ncu_sass_$tag.csv" 2>&1
      rm -f "$res/prof_$tag.ncu-rep"
    fi
  done
fi
if want dram; then
  # DRAM bytes and peak memory of one forward, fused vs naive, N = 512 ... 8192 (B=1 H=16 d=128 bf16), and
  # the plot (bench/plot_dram.py).
  step dram 150 ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv "$bin/bench_fused_attention" \
    --skip-grid --naive-memory
  step dram_plot 30 python3 bench/plot_dram.py "$res/dram.log" --memory "$res/dram.log" --out "$res/dram.png" \
    --json "$res/dram.json"
fi
want report && step report 110 "$FLASHCHECK_EXE" report --subjects emulation,cuda --out "$res/h200-report" --progress lines
want sdpa_verdict && step sdpa_verdict 150 bash scripts/device/pytorch_sdpa_verdict.sh --out "$res/sdpa"
want pytest_example && step pytest_example 45 bash scripts/device/pytest_example.sh
want gpu_fuzz && step gpu_fuzz $(( ${FUZZ_SECONDS:-90} + 30 )) "$FLASHCHECK_EXE" fuzz --subject cuda --seconds "${FUZZ_SECONDS:-90}" \
  --seed "${FUZZ_SEED:-1}" --jobs 16 --out "$res/fuzz-findings"
tail -n 25 "$res"/*.log > "$final/tails.log" 2>&1
cp "$OUT/steps.log" "$final/"
tar -czf "$final/results.tgz" -C "$OUT" .
cat "$OUT/steps.log"
