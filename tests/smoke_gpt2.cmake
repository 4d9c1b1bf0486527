# CLI checks for the gpt2 suite (included by tests/CMakeLists.txt): a quick CPU run of ours (gpt-mini,
# batch 1, seq 32) verifies one sequence's loss against the fp64 reference and times AdamW steps.
dlb_smoke(gpt2_cpu_quick 0 run --suite gpt2 --device cpu --quick --no-report --out ${OUT}/gpt2)
# --dtype tf32/fp16 is the GPU trainer's GEMM autocast: on the CPU the case is recorded as skipped
# with the reason (exit 0), not a usage error. (bf16 on the CPU is the AMP step: test_gpt2_suite.)
add_test(NAME smoke.gpt2_cpu_fp16_skipped_with_reason
         COMMAND bash -c [[rm -rf "$2" && "$1" run --suite gpt2 --device cpu --quick --dtype fp16 --no-report \
           --out "$2" >/dev/null && grep -q '"skipped": "gpt2 impl=ours on the CPU trains in fp32 and bf16' "$2/results.json"]]
           _ ${DLB_CLI} ${OUT}/gpt2_fp16)
set_tests_properties(smoke.gpt2_cpu_fp16_skipped_with_reason PROPERTIES LABELS smoke TIMEOUT 300)
