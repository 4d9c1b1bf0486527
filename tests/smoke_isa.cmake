# The ISA cap DLB_CPU_ISA (kernels/cpu/isa.h), included by tests/CMakeLists.txt.
# Bad values: exit 2 with one line. A cap above the CPU: clamped, with a note in `info` and on stderr.
add_test(NAME smoke.isa_bad_value COMMAND bash -c
  "out=$(DLB_CPU_ISA=avx1024 \"$1\" info 2>&1 >/dev/null); rc=$?; [ $rc -eq 2 ] || { echo \"rc=$rc\"; exit 1; }; \
   [ $(printf '%s\\n' \"$out\" | wc -l) -eq 1 ] && printf '%s' \"$out\" | grep -q 'DLB_CPU_ISA=avx1024' && echo ok"
  bash ${DLB_CLI})
add_test(NAME smoke.isa_cap_recorded COMMAND bash -c
  "set -e; d=${OUT}/isa; rm -rf $d; \
   DLB_CPU_ISA=avx2 \"$1\" info | grep -q 'kernel ISA    avx2'; \
   DLB_CPU_ISA=scalar \"$1\" run --suite matmul --device cpu --sizes 32 --dtype fp32 --filter blocked --no-report --out $d >/dev/null; \
   grep -q '\"cpu_isa\": *\"scalar\"' $d/results.jsonl; grep -q '\"isa_cap\": *\"scalar\"' $d/results.json; \
   if ! grep -qw avx512_bf16 /proc/cpuinfo; then \
     DLB_CPU_ISA=avx512_bf16 \"$1\" info 2>&1 | grep -q 'clamped'; fi; echo ok"
  bash ${DLB_CLI})
set_tests_properties(smoke.isa_bad_value smoke.isa_cap_recorded PROPERTIES LABELS smoke TIMEOUT 120)

# oneDNN once per ISA level (test_isa loops over the levels in one process), in fresh processes with DLB_CPU_ISA set (oneDNN reads
# its cap once per process). Levels the CPU lacks are skipped by the tests with the reason.
foreach(level scalar avx2 avx512 avx512_bf16)
  foreach(t test_onednn)
    gtest_discover_tests(${t} TEST_PREFIX "isa_${level}." DISCOVERY_TIMEOUT 60
      PROPERTIES ENVIRONMENT "DLB_CPU_ISA=${level}" LABELS unit TIMEOUT 120
                 SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endforeach()
endforeach()
