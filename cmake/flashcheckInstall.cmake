# `cmake --install` for flashcheck: headers, libraries, the flashcheck and flashcheck-properties
# executables, the plugins, and a config package so that another project can write
#
#     find_package(flashcheck REQUIRED)
#     target_link_libraries(my_tests PRIVATE flashcheck::reference flashcheck::properties)
#     flashcheck_add_kernel_tests(my_kernel PLUGIN my_kernel_plugin RECIPES fp16 bf16)
#
# Included once at the end of the top-level CMakeLists.txt, after every target exists; targets of a
# layer that is not in this build are skipped.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FLASHCHECK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashcheck CACHE STRING
    "Where flashcheckConfig.cmake is installed, relative to the prefix")

# Libraries, exported as flashcheck::<short name>.
set(_fc_exported)
foreach(_pair reference:flashcheck_reference distributions:flashcheck_distributions
              subject:flashcheck_subject emulation:flashcheck_emulation plugin_abi:flashcheck_plugin_abi
              subjects:flashcheck_subjects
              gpu_oracle:flashcheck_gpu_oracle check:flashcheck_check fuzz:flashcheck_fuzz
              properties:flashcheck_properties
              flashcheck:flashcheck property_runner:flashcheck_property_runner)
  string(REPLACE ":" ";" _pair "${_pair}")
  list(GET _pair 0 _short)
  list(GET _pair 1 _target)
  if(TARGET ${_target})
    set_target_properties(${_target} PROPERTIES EXPORT_NAME ${_short})
    list(APPEND _fc_exported ${_target})
  endif()
endforeach()
install(TARGETS ${_fc_exported} EXPORT flashcheckTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Plugins are loaded by path, not linked: plain shared libraries next to the others (the registry finds
# the CUDA ones through <prefix>/bin/../lib).
foreach(_plugin flashcheck_cuda_plugin flashcheck_cuda_naive_plugin flashcheck_cuda_v2_plugin flashcheck_example_cpu_plugin)
  if(TARGET ${_plugin})
    install(TARGETS ${_plugin} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()

# Headers keep their source paths: #include "reference/problem.h", "flashcheck/plugin.h".
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/flashcheck DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(_dir reference kernels properties)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h" PATTERN "cuda" EXCLUDE)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/examples/plugins/cpu_reference_plugin.c
        DESTINATION ${CMAKE_INSTALL_DATADIR}/flashcheck/examples)

install(EXPORT flashcheckTargets NAMESPACE flashcheck:: DESTINATION ${FLASHCHECK_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/flashcheckConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/flashcheckConfig.cmake
  INSTALL_DESTINATION ${FLASHCHECK_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/flashcheckConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/flashcheckConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/flashcheckConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/flashcheckKernelTests.cmake
        DESTINATION ${FLASHCHECK_INSTALL_CMAKEDIR})
