# CLI checks for the matmul suite (included by tests/CMakeLists.txt).
dlb_smoke(matmul_sizes 0 run --suite matmul --device cpu --sizes 64,100 --no-report --out ${OUT}/mm)
dlb_smoke(matmul_dtype_filter 0 run --suite matmul --device cpu --sizes 33 --dtype fp32 --no-report --out ${OUT}/mm_dtype)
dlb_smoke(matmul_sizes_zero 2 run --suite matmul --device cpu --sizes 64,0 --no-report --out ${OUT}/x)
dlb_smoke(matmul_sizes_nonnumeric 2 run --suite matmul --device cpu --sizes 64,big --no-report --out ${OUT}/x)

# A size too large for memory is recorded "out of memory" and the sweep goes on (exit 0).
add_test(NAME smoke.matmul_out_of_memory COMMAND bash -c
  "set -e; d=${OUT}/mm_oom; rm -rf $d; \"$1\" run --suite matmul --device cpu --sizes 1000000,16 --dtype fp32 --no-report --out $d >/dev/null; \
   grep -q '\"error\": *\"out of memory\"' $d/results.jsonl; grep -q 'size=16' $d/results.jsonl; echo ok"
  bash ${DLB_CLI})
set_tests_properties(smoke.matmul_out_of_memory PROPERTIES LABELS smoke TIMEOUT 120)

# The OpenBLAS core: DLBENCH_OPENBLAS_CORE=library keeps the library's choice; forcing Haswell on an
# AVX2 CPU re-execs once and every CPU record says which core ran. A user's OPENBLAS_CORETYPE wins over
# both (some machines export one: the mode is then "forced", the reason names it), so the test clears it.
add_test(NAME smoke.matmul_openblas_core COMMAND env -u OPENBLAS_CORETYPE bash -c
  "set -e; d=${OUT}/mm_core; rm -rf $d; \
   DLBENCH_OPENBLAS_CORE=library \"$1\" run --suite matmul --device cpu --sizes 32 --dtype fp32 --filter openblas --no-report --out $d/lib >/dev/null; \
   grep -q '\"openblas_core_mode\": *\"library\"' $d/lib/results.jsonl; \
   if grep -qw avx2 /proc/cpuinfo; then \
     DLBENCH_OPENBLAS_CORE=Haswell \"$1\" run --suite matmul --device cpu --sizes 32 --dtype fp32 --filter openblas --no-report --out $d/hsw >/dev/null; \
     grep -q '\"openblas_core\": *\"Haswell\"' $d/hsw/results.jsonl; grep -q '\"openblas_core_mode\": *\"forced\"' $d/hsw/results.jsonl; fi; echo ok"
  bash ${DLB_CLI})
set_tests_properties(smoke.matmul_openblas_core PROPERTIES LABELS smoke TIMEOUT 120)
# Interleaving's seed (harness/run/engine.h Ordering): a bad one is refused.
dlb_smoke(run_seed_negative 2 run --suite matmul --device cpu --sizes 8 --seed -1 --no-report --out ${OUT}/x)
dlb_smoke(run_seed_overflow 2 run --suite matmul --device cpu --sizes 8 --seed 18446744073709551616 --no-report --out ${OUT}/x)
