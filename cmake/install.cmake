# `cmake --install BUILD --prefix P` (included by the top CMakeLists.txt):
#
#   P/include/artel/<layer>/*.h    the public headers (ARTEL_PUBLIC_<layer>)
#   P/lib/libartel_<layer>.a       the layers' static libraries (and libartel_comm_mpi.a)
#   P/lib/cmake/artel/             the package: find_package(artel) gives artel::artel
#   P/bin/artel                    the program
#   P/share/artel/data/, tools/    the bundled data sets and the helper scripts
#
# How a program uses it: docs/INSTALL.md.
include(CMakePackageConfigHelpers)

# A public header may include only public headers, or the installed tree
# would not compile; checked whenever CMake configures. (CI also compiles
# every installed header on its own, without -march=native.)
set(ARTEL_PUBLIC_HEADERS "")
foreach(layer IN LISTS ARTEL_LAYERS)
  foreach(header IN LISTS ARTEL_PUBLIC_${layer})
    list(APPEND ARTEL_PUBLIC_HEADERS artel/${layer}/${header})
  endforeach()
endforeach()
foreach(header IN LISTS ARTEL_PUBLIC_HEADERS)
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/src/${header})
    message(FATAL_ERROR "${header} is listed as public in CMakeLists.txt, but src/${header} does not exist")
  endif()
  file(STRINGS ${PROJECT_SOURCE_DIR}/src/${header} includes REGEX "^#include \"artel/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
    if(NOT included IN_LIST ARTEL_PUBLIC_HEADERS)
      message(FATAL_ERROR "src/${header} is public but includes ${included}, which is not: add it to the "
                          "ARTEL_PUBLIC_ list of its layer in CMakeLists.txt, or include it from a .cpp instead")
    endif()
  endforeach()
endforeach()

foreach(layer IN LISTS ARTEL_LAYERS)
  list(TRANSFORM ARTEL_PUBLIC_${layer} PREPEND ${PROJECT_SOURCE_DIR}/src/artel/${layer}/ OUTPUT_VARIABLE files)
  install(FILES ${files} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/artel/${layer})
endforeach()

# artel::artel (every layer, and the MPI backend when built), artel::<layer>,
# artel::comm_mpi, and the program as artel::cli.
set(ARTEL_INSTALL_TARGETS artel artel_cli)
foreach(layer IN LISTS ARTEL_LAYERS)
  list(APPEND ARTEL_INSTALL_TARGETS artel_${layer})
endforeach()
set(ARTEL_WITH_MPI OFF)
if(TARGET artel_comm_mpi)
  list(APPEND ARTEL_INSTALL_TARGETS artel_comm_mpi)
  set(ARTEL_WITH_MPI ON)
endif()
set_target_properties(artel_cli PROPERTIES EXPORT_NAME cli)
install(TARGETS ${ARTEL_INSTALL_TARGETS} EXPORT artelTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The program looks for its data in <bin>/../share/artel (train/bundled_data.cpp).
install(DIRECTORY data/ DESTINATION ${CMAKE_INSTALL_DATADIR}/artel/data)
install(DIRECTORY tools/ DESTINATION ${CMAKE_INSTALL_DATADIR}/artel/tools OPTIONAL
        USE_SOURCE_PERMISSIONS PATTERN __pycache__ EXCLUDE)

set(ARTEL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/artel)
install(EXPORT artelTargets NAMESPACE artel:: DESTINATION ${ARTEL_CMAKE_DIR})
configure_package_config_file(cmake/artelConfig.cmake.in ${PROJECT_BINARY_DIR}/artelConfig.cmake
                              INSTALL_DESTINATION ${ARTEL_CMAKE_DIR})
# 0.x: a minor version may change the interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/artelConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/artelConfig.cmake ${PROJECT_BINARY_DIR}/artelConfigVersion.cmake
        DESTINATION ${ARTEL_CMAKE_DIR})
