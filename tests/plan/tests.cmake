# The planner's tests (artel_plan_tests, defined with every layer's in
# tests/CMakeLists.txt) also build a GPT from models/ to check the planner's
# parameter count against the model itself, and run the `artel` program for
# `artel plan`'s command line, whose GPTs are `artel train`'s (train/). The checks against published tables
# (published_tables_test.cpp, PublishedTables.*) are among them: they take
# seconds and every one must pass.
target_link_libraries(artel_plan_tests PRIVATE artel_models artel_train)
add_dependencies(artel_plan_tests artel_cli)
