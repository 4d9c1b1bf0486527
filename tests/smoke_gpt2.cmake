# CLI checks for the gpt2 suite (included by tests/CMakeLists.txt): a quick CPU run of ours (gpt-mini,
# batch 1, seq 32) verifies one sequence's loss against the fp64 reference and times AdamW steps.
dlb_smoke(gpt2_cpu_quick 0 run --suite gpt2 --device cpu --quick --no-report --out ${OUT}/gpt2)
