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
   grep -Eq '\"reason\": *\"auto: (ISA scalar|no oneDNN)' $d/results.json; \
   DLB_CPU_ISA=avx2 \"$1\" info | grep -Eq '^layer GEMMs   openblas \\(auto: (ISA avx2|no oneDNN)'; \
   DLB_SGEMM=openblas \"$1\" info | grep -q '^layer GEMMs   openblas (DLB_SGEMM=openblas'; \
   if ! grep -qw avx512_bf16 /proc/cpuinfo; then \
     DLB_CPU_ISA=avx512_bf16 \"$1\" info 2>&1 | grep -q 'clamped'; fi; echo ok"
  bash ${DLB_CLI})
set_tests_properties(smoke.isa_bad_value smoke.isa_cap_recorded PROPERTIES LABELS smoke TIMEOUT 120)

# oneDNN once per ISA level (test_isa loops over the levels in one process; test_seq_rnn: its RNN
# primitives; test_sgemm: the layers' GEMM), in fresh processes with DLB_CPU_ISA set (oneDNN reads
# its cap once per process). Levels the CPU lacks are skipped by the tests with the reason.
foreach(level scalar avx2 avx512 avx512_bf16)
  foreach(t test_onednn test_seq_rnn test_sgemm)
    gtest_discover_tests(${t} TEST_PREFIX "isa_${level}." DISCOVERY_TIMEOUT 60
      PROPERTIES ENVIRONMENT "DLB_CPU_ISA=${level}" LABELS unit TIMEOUT 120
                 SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endforeach()
endforeach()

# bf16 on the CPU is verified, not skipped (oneDNN built), and says how it ran: matmul's and conv's
# impl=widen (emulated) on every CPU, oneDNN's native on an avx512_bf16 CPU (oneDNN 2.6 has no bf16
# matmul or conv at AVX2, where those cases skip with the reason), the amp step emulated when
# DLB_CPU_ISA forbids bf16.
add_test(NAME smoke.bf16_compute_recorded COMMAND bash -c
  "set -e; d=${OUT}/bf16; rm -rf $d; \
   \"$1\" info --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"onednn\"][\"available\"] else 1)' \
     || { echo 'built without oneDNN: [  SKIPPED ]'; exit 0; }; \
   \"$1\" run --suite matmul --device cpu --sizes 64 --dtype bf16 --no-report --out $d/mm >/dev/null; \
   grep '\"impl\": *\"widen\"' $d/mm/results.jsonl | grep '\"verified\": *true' | grep -q '\"bf16_compute\": *\"emulated\"'; \
   if grep -qw avx512_bf16 /proc/cpuinfo; then grep '\"impl\": *\"onednn\"' $d/mm/results.jsonl \
     | grep '\"verified\": *true' | grep -q '\"bf16_compute\": *\"native\"'; fi; \
   \"$1\" run --suite conv --device cpu --dtype bf16 --batch 2 --filter 'conv2d_bwd_filter.*lecture.conv2' --no-report --out $d/conv >/dev/null; \
   grep '\"impl\": *\"widen\"' $d/conv/results.jsonl | grep '\"verified\": *true' | grep -q '\"bf16_compute\": *\"emulated\"'; \
   if grep -qw avx512_bf16 /proc/cpuinfo; then grep '\"impl\": *\"onednn\"' $d/conv/results.jsonl \
     | grep '\"verified\": *true' | grep -q '\"bf16_compute\": *\"native\"'; fi; \
   DLB_CPU_ISA=avx512 \"$1\" run --suite amp --device cpu --quick --dtype bf16 --filter 'mlp/batch=64' --no-report --out $d/amp >/dev/null; \
   grep -q '\"bf16_compute\": *\"emulated\"' $d/amp/results.jsonl; echo ok"
  bash ${DLB_CLI})
set_tests_properties(smoke.bf16_compute_recorded PROPERTIES LABELS smoke TIMEOUT 300
                     SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
