# The GPT reference test against PyTorch (included by tests/CMakeLists.txt):
# gpt_reference_dump writes artel's weights, batch, logits, loss and gradients;
# gpt_reference_test.py runs tools/torch/gpt.py on the same and compares. It
# needs torch in ARTEL_TORCH_PYTHON (Debian's python3-torch, which
# scripts/setup.sh installs) and fails, not skips, without it.
# `ctest -L reference` runs just this.
set(ARTEL_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "python3 with torch, for the PyTorch reference test")
add_executable(gpt_reference_dump ${CMAKE_CURRENT_LIST_DIR}/gpt_reference_dump.cpp)
target_link_libraries(gpt_reference_dump PRIVATE artel)
add_test(NAME gpt_reference_torch
         COMMAND ${ARTEL_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/gpt_reference_test.py
                 $<TARGET_FILE:gpt_reference_dump>)
set_tests_properties(gpt_reference_torch PROPERTIES TIMEOUT 300 LABELS reference)

# Hugging Face's GPT-2 layout in and out (models/hf_gpt2.h): artel's logits
# against a GPT-2 computed as transformers does, and the export round trip.
add_executable(hf_gpt2_dump ${CMAKE_CURRENT_LIST_DIR}/hf_gpt2_dump.cpp)
target_link_libraries(hf_gpt2_dump PRIVATE artel)
add_test(NAME hf_gpt2_torch
         COMMAND ${ARTEL_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_gpt2_test.py $<TARGET_FILE:hf_gpt2_dump>)
set_tests_properties(hf_gpt2_torch PROPERTIES TIMEOUT 300 LABELS reference)

# The PyTorch harness's --grad-compression powersgd, the reference column of
# README's PowerSGD loss table, runs (two gloo processes, 12 steps).
add_test(NAME torch_harness_powersgd
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/torch_powersgd_test.sh ${ARTEL_TORCH_PYTHON}
                 ${PROJECT_SOURCE_DIR}/tools/torch/train.py)
set_tests_properties(torch_harness_powersgd PROPERTIES TIMEOUT 300 LABELS reference)
