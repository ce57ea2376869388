# The allocator the artel program runs on (Note [The program's allocator],
# src/artel/core/tensor.cpp): the program links tcmalloc, and the memory
# limit's give-back reaches tcmalloc's free pages, kept as the program keeps
# them (release rate 0), not only glibc's.
if(TARGET PkgConfig::TCMALLOC)
  add_test(NAME program_runs_on_tcmalloc
           COMMAND sh -c "ldd '$<TARGET_FILE:artel_cli>' | grep -q libtcmalloc_minimal")
  list(GET TCMALLOC_LINK_LIBRARIES 0 tcmalloc_library)
  add_test(NAME memory_limit_under_tcmalloc COMMAND artel_core_tests --gtest_filter=MemoryLimit*)
  set_tests_properties(program_runs_on_tcmalloc memory_limit_under_tcmalloc PROPERTIES LABELS unit TIMEOUT 120)
  set_tests_properties(memory_limit_under_tcmalloc PROPERTIES
                       ENVIRONMENT "LD_PRELOAD=${tcmalloc_library};TCMALLOC_RELEASE_RATE=0")
endif()
