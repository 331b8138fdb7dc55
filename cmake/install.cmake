# ============================================================================
# cmake/install.cmake — what `cmake --install` puts under the prefix.
#
# The embeddable runtime (loka::runtime, with loka::kernels and, in CUDA builds,
# loka::kernels_cuda under it), its public headers (include/loka/*.h), the three
# CLIs, and a package config so that `find_package(loka)` works:
#   lib/cmake/loka/lokaConfig.cmake         finds the dependencies, then the targets
#   lib/cmake/loka/lokaConfigVersion.cmake  0.y releases are compatible within y
#   lib/cmake/loka/lokaTargets.cmake        the exported targets
# The compiler libraries (loka_ir, loka_passes, loka_cli) are deliberately not exported:
# a serving program links loka::runtime alone. The libraries are static, so
# their private dependencies (onnx_proto, protobuf, zlib, CUDA) reach the
# consumer's link line; lokaConfig.cmake finds them with find_dependency.
# ============================================================================
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(loka_install_targets loka_kernels loka_runtime)
if(LOKA_HAVE_CUDA)
  list(APPEND loka_install_targets loka_kernels_cuda)
endif()
install(TARGETS ${loka_install_targets}
        EXPORT lokaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The tools keep the link-time paths of their shared dependencies (libonnx unpacked
# into a prefix of its own, the CUDA libraries) so they run from the prefix as built.
set_target_properties(loka-opt loka-run loka-inspect PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS loka-opt loka-run loka-inspect RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(loka_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/loka)
install(EXPORT lokaTargets NAMESPACE loka:: DESTINATION ${loka_config_dir})
# Where this build found ONNX: a hint for consumers on machines where libonnx lives
# in a prefix of its own (the GPU machine); CMAKE_PREFIX_PATH still wins.
set(LOKA_ONNX_DIR_HINT "${ONNX_DIR}")
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/lokaConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/lokaConfig.cmake
                              INSTALL_DESTINATION ${loka_config_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/lokaConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/lokaConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/lokaConfigVersion.cmake
        DESTINATION ${loka_config_dir})
