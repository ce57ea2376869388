# The launcher's end-to-end tests share a helper that runs the `artel` program.
target_sources(artel_launch_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/artel_process.cpp)
