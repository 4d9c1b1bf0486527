# CLI checks for the attention suite (included by tests/CMakeLists.txt): a quick CPU run verifies and
# times flash and unfused, forward and backward, causal and full.
dlb_smoke(attention_cpu_quick 0 run --suite attention --device cpu --quick --no-report --out ${OUT}/attention)
