# CLI checks for suite seq (included by tests/CMakeLists.txt); its bad sizes are in tests/bad_inputs.tsv.
dlb_smoke(seq_quick_rnn 0 run --suite seq --device cpu --quick --model rnn,mlp --no-report --out ${OUT}/seq)
