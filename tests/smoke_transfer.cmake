# CLI checks for the transfer suite (included by tests/CMakeLists.txt; dlb_smoke NAME CODE ARGS...).
dlb_smoke(transfer_quick 0 run --suite transfer --quick --no-report --out ${OUT}/transfer)
dlb_smoke(transfer_sizes_negative 2 run --suite transfer --sizes -1MB --no-report --out ${OUT}/x)
dlb_smoke(transfer_sizes_zero 2 run --suite transfer --sizes 0 --no-report --out ${OUT}/x)
dlb_smoke(transfer_sizes_bad_unit 2 run --suite transfer --sizes 1XB --no-report --out ${OUT}/x)
# More than this machine has: every case is recorded "out of memory", nothing is verified, exit 0.
add_test(NAME smoke.transfer_2tb_out_of_memory
  COMMAND bash -c "rm -rf \"$2\" && \"$1\" run --suite transfer --sizes 2TB --no-report --out \"$2\" >/dev/null && grep -q '\"error\":\"out of memory\"' \"$2/results.jsonl\" && ! grep -q '\"verified\":true' \"$2/results.jsonl\" && echo ok"
          smoke $<TARGET_FILE:dlbench> ${OUT}/transfer-2tb)
set_tests_properties(smoke.transfer_2tb_out_of_memory PROPERTIES LABELS smoke TIMEOUT 600)
