# flashcheck_add_kernel_tests(<name> PLUGIN <target-or-path>
#                             [RECIPES fp16 bf16 ...] [MASKS none causal window key_lengths dense]
#                             [CASES n] [FUZZ_CASES n] [SEED s] [SHARDS n] [GPU] [LABELS ...] [TIMEOUT s])
#
# Registers flashcheck's property suite and a short fuzz run for a kernel plugin (a shared library
# exporting flashcheck_plugin_entry, include/flashcheck/plugin.h) as ctest tests:
#
#   <name>.properties        every property of the suite, CASES generated cases each (default 30)
#   <name>.fuzz              the error-budget property over FUZZ_CASES cases (default 200), own seed
#                            (not registered for FUZZ_CASES 0)
#
# Both run flashcheck::property_runner (flashcheck-properties), a GoogleTest executable. SHARDS n splits
# the property suite into n ctest entries <name>.properties.<i> through GoogleTest's own sharding (GTEST_TOTAL_SHARDS /
# GTEST_SHARD_INDEX), so `ctest -j` runs them side by side. GPU marks the tests RESOURCE_GROUPS "gpus:1"
# (and label gpu; skipped where no GPU is usable): on a multi-GPU machine `ctest --resource-spec-file gpus.json -j N` gives each test its
# own GPU, which the runner maps to CUDA_VISIBLE_DEVICES. RECIPES and MASKS narrow what the plugin
# declares; a recipe it does not declare is an error. A plugin that cannot be loaded (wrong ABI version,
# missing symbol) is a failing test whose output says why.
include_guard(GLOBAL)

function(flashcheck_add_kernel_tests name)
  cmake_parse_arguments(FCK "GPU" "PLUGIN;CASES;FUZZ_CASES;SEED;SHARDS;TIMEOUT" "RECIPES;MASKS;LABELS" ${ARGN})
  if(NOT FCK_PLUGIN)
    message(FATAL_ERROR "flashcheck_add_kernel_tests(${name}): PLUGIN <target-or-path> is required")
  endif()
  if(TARGET ${FCK_PLUGIN})
    set(_plugin "$<TARGET_FILE:${FCK_PLUGIN}>")
  else()
    get_filename_component(_plugin "${FCK_PLUGIN}" ABSOLUTE)
  endif()
  if(TARGET flashcheck::property_runner)
    set(_runner flashcheck::property_runner)  # an imported executable: ctest runs its installed path
  elseif(TARGET flashcheck_property_runner)
    set(_runner flashcheck_property_runner)   # inside flashcheck's own build
  else()
    message(FATAL_ERROR "flashcheck_add_kernel_tests: flashcheck::property_runner is not available")
  endif()
  foreach(_opt CASES FUZZ_CASES SEED SHARDS TIMEOUT)
    if(DEFINED FCK_${_opt} AND NOT FCK_${_opt} MATCHES "^[0-9]+$")
      message(FATAL_ERROR "flashcheck_add_kernel_tests(${name}): ${_opt} must be a non-negative integer, got '${FCK_${_opt}}'")
    endif()
  endforeach()
  if(NOT DEFINED FCK_CASES)
    set(FCK_CASES 30)
  endif()
  if(NOT DEFINED FCK_FUZZ_CASES)
    set(FCK_FUZZ_CASES 200)
  endif()
  if(NOT DEFINED FCK_SHARDS OR FCK_SHARDS LESS 1)
    set(FCK_SHARDS 1)
  endif()
  if(NOT DEFINED FCK_TIMEOUT)
    set(FCK_TIMEOUT 900)
  endif()

  set(_args --plugin "${_plugin}" --cases ${FCK_CASES} --fuzz-cases ${FCK_FUZZ_CASES})
  if(FCK_RECIPES)
    string(REPLACE ";" "," _r "${FCK_RECIPES}")
    list(APPEND _args --recipes ${_r})
  endif()
  if(FCK_MASKS)
    string(REPLACE ";" "," _m "${FCK_MASKS}")
    list(APPEND _args --masks ${_m})
  endif()
  if(DEFINED FCK_SEED)
    list(APPEND _args --seed ${FCK_SEED})
  endif()
  set(_labels flashcheck ${FCK_LABELS})
  if(FCK_GPU)
    list(APPEND _labels gpu)
    list(APPEND _args --require-gpu)
  endif()

  set(_parts properties)
  if(FCK_FUZZ_CASES GREATER 0)
    list(APPEND _parts fuzz)
  endif()
  foreach(_part ${_parts})
    set(_filter "${_part}.*")
    set(_shards ${FCK_SHARDS})
    if(_part STREQUAL "fuzz")
      set(_shards 1)  # one GoogleTest test: nothing to shard
    endif()
    math(EXPR _last "${_shards} - 1")
    foreach(_shard RANGE ${_last})
      set(_test ${name}.${_part})
      set(_env)
      if(_shards GREATER 1)
        set(_test ${name}.${_part}.${_shard})
        set(_env GTEST_TOTAL_SHARDS=${_shards} GTEST_SHARD_INDEX=${_shard})
      endif()
      add_test(NAME ${_test} COMMAND ${_runner} ${_args} --gtest_filter=${_filter})
      set_tests_properties(${_test} PROPERTIES LABELS "${_labels}" TIMEOUT ${FCK_TIMEOUT})
      if(_env)
        set_tests_properties(${_test} PROPERTIES ENVIRONMENT "${_env}")
      endif()
      if(FCK_GPU)
        # Skipped, not failed, where the process sees no GPU (the runner's --require-gpu).
        set_tests_properties(${_test} PROPERTIES RESOURCE_GROUPS "gpus:1" SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
      endif()
    endforeach()
  endforeach()
endfunction()
