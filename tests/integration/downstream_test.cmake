# cmake -DBUILD_DIR=... -DEXAMPLE_DIR=... -DWORK_DIR=... [-DGENERATOR=...] -P downstream_test.cmake
# Installs flashcheck from BUILD_DIR into WORK_DIR/prefix, builds EXAMPLE_DIR against it and runs its ctest.
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "downstream: ${what} failed (${rc})\n${out}\n${err}")
  endif()
  message(STATUS "downstream: ${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/lib/cmake/flashcheck/flashcheckConfig.cmake)
  message(FATAL_ERROR "downstream: the install has no lib/cmake/flashcheck/flashcheckConfig.cmake: the top-level "
                      "CMakeLists.txt must end with include(cmake/flashcheckInstall.cmake)")
endif()
set(gen)
if(GENERATOR)
  set(gen -G ${GENERATOR})
endif()
step("configure" ${CMAKE_COMMAND} -S ${EXAMPLE_DIR} -B ${WORK_DIR}/build ${gen} -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_PREFIX_PATH=${prefix})
step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2)
step("ctest" ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/build -j2 --output-on-failure)
message("${step_output}")
