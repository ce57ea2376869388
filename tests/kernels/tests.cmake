# The kernels compile for any x86-64-v3 CPU (AVX2, no AVX-512), as
# ARTEL_NATIVE=OFF promises and an AMD Zen 3 machine needs with -march=native.
# AVX-512 code lives only in functions that name their target, and GCC gives
# a lambda inside such a function no target of its own, so an intrinsic in a
# lambda builds on an AVX-512 machine and fails everywhere else. Built at -O0,
# and only by this test: always_inline's target check holds at every level.
file(GLOB kernel_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/artel/kernels/*.cpp)
add_library(artel_kernels_x86_64_v3 OBJECT EXCLUDE_FROM_ALL ${kernel_sources})
target_link_libraries(artel_kernels_x86_64_v3 PRIVATE artel_core DNNL::dnnl OpenMP::OpenMP_CXX)
get_target_property(options artel_kernels_x86_64_v3 COMPILE_OPTIONS)
list(REMOVE_ITEM options -march=native -O3)
set_target_properties(artel_kernels_x86_64_v3 PROPERTIES COMPILE_OPTIONS "${options};-march=x86-64-v3;-O0")
add_test(NAME kernels_compile_for_x86_64_v3
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target artel_kernels_x86_64_v3)
set_tests_properties(kernels_compile_for_x86_64_v3 PROPERTIES LABELS build TIMEOUT 600)
