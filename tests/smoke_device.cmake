# Issue 12: the GPU-machine sequence dry-run here: ci/device_bundle.sh, then ci/device_run.sh from the
# archive (no GPU: every gpu test SKIPs, libraries resolve, 2 files come back, summary.txt last);
# forced GPU mode, a step timeout, the call budget and a SIGTERM. Skips (77) in a CPU-only build and
# where a GPU driver is (the GPU job runs the real calls there).
add_test(NAME smoke.device_dry_run COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/device_dry_run.sh
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/smoke-out/device)
set_tests_properties(smoke.device_dry_run PROPERTIES LABELS smoke TIMEOUT 300 SKIP_RETURN_CODE 77)
