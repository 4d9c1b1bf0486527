# CLI checks for suite seq (included by tests/CMakeLists.txt); its bad sizes are in tests/bad_inputs.tsv.
dlb_smoke(seq_quick_rnn 0 run --suite seq --device cpu --quick --model rnn,mlp --no-report --out ${OUT}/seq)
# op=infer on every device: exit 0, and the GPU rows either ran (records of seq/infer/cuda:0) or, on a
# machine without a GPU, were skipped with the reason on stderr ("GPU cases skipped: no CUDA device ...").
# (`--device cuda:0` itself is bad usage there, exit 2: smoke.bad_device_index's contract.)
add_test(NAME smoke.seq_infer_gpu_rows_or_skip_reason
         COMMAND bash -c [[rm -rf "$2" && err=$(mktemp) && "$1" run --suite seq --op infer --device all --quick \
           --model mlp,rnn --infer-batch 1 --no-report --out "$2" >/dev/null 2>"$err"; rc=$?; cat "$err"; \
           [ $rc = 0 ] && { grep -q "GPU cases skipped: ." "$err" || grep -q "seq/infer/cuda:0" "$2/results.json"; }; \
           ok=$?; rm -f "$err"; exit $ok]] _ ${DLB_CLI} ${OUT}/seq_infer)
set_tests_properties(smoke.seq_infer_gpu_rows_or_skip_reason PROPERTIES LABELS smoke TIMEOUT 300)
