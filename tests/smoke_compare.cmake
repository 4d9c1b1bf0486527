# Regression tracking end to end (issue 8), included by tests/CMakeLists.txt: two real runs of a tiny
# matmul suite compare with exit 0; the same run made 1.5x slower compares with exit 1 naming the
# slowed cases; baseline save/check and history on those runs; bad input exits 2 with one line.
# The real runs are made once (smoke.compare_setup, a CTest fixture) and read by the others.
set(DLB_CMP_HELPER ${CMAKE_CURRENT_SOURCE_DIR}/compare_smoke.sh)
set(DLB_CMP_OUT ${OUT}/compare)
set(DLB_CMP_DATA ${CMAKE_CURRENT_SOURCE_DIR}/data/compare)

add_test(NAME smoke.compare_setup COMMAND bash ${DLB_CMP_HELPER} setup ${DLB_CLI} ${DLB_CMP_OUT})
set_tests_properties(smoke.compare_setup PROPERTIES LABELS smoke TIMEOUT 600 FIXTURES_SETUP dlb_compare_runs)
foreach(mode pair slowed baseline history busy)
  add_test(NAME smoke.compare_${mode} COMMAND bash ${DLB_CMP_HELPER} ${mode} ${DLB_CLI} ${DLB_CMP_OUT})
  set_tests_properties(smoke.compare_${mode} PROPERTIES LABELS smoke TIMEOUT 600 FIXTURES_REQUIRED dlb_compare_runs
                       RESOURCE_LOCK dlb_compare_out)
endforeach()

# Concurrent baseline saves (issue 27): each its own temporary file, no run needed.
add_test(NAME smoke.baseline_save_race COMMAND bash ${DLB_CMP_HELPER} save_race ${DLB_CLI} ${OUT}/save-race)
set_tests_properties(smoke.baseline_save_race PROPERTIES LABELS smoke TIMEOUT 300)

# Fixture files (tests/data/compare): verdicts and the exit codes.
dlb_smoke(compare_fixtures_regression 1 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/new.json)
dlb_smoke(compare_fixtures_json 1 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/new.json --json)
dlb_smoke(compare_fixtures_loose 1 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/new.json --threshold 50%)  # FAILED still fails
dlb_smoke(compare_same_file 0 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json)
dlb_smoke(compare_jsonl 0 compare ${DLB_CMP_DATA}/base_only.jsonl ${DLB_CMP_DATA}/base.json)
dlb_smoke(history_fixtures 0 history ${DLB_CMP_DATA})
dlb_smoke(compare_duplicate_case 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/duplicate.json)

# Bad input: truncated, not JSON, binary, foreign JSON, missing -> exit 2 with one line.
foreach(bad truncated not_json binary foreign)
  dlb_smoke(compare_bad_${bad} 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/${bad}.json)
  dlb_smoke(compare_bad_${bad}_as_base 2 compare ${DLB_CMP_DATA}/${bad}.json ${DLB_CMP_DATA}/base.json)
  dlb_smoke(baseline_check_bad_${bad} 2 baseline check ${DLB_CMP_DATA}/${bad}.json --dir ${DLB_CMP_OUT}/no-baselines)
endforeach()
dlb_smoke(compare_bad_missing 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/no_such_results.json)
dlb_smoke(compare_bad_missing_folder 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA})
dlb_smoke(baseline_save_no_fingerprint 2 baseline save ${DLB_CMP_DATA}/base_only.jsonl --dir ${DLB_CMP_OUT}/no-baselines)
dlb_smoke(history_missing 2 history ${DLB_CMP_DATA}/no_such_folder)

# Bad usage.
dlb_smoke(compare_one_run 2 compare ${DLB_CMP_DATA}/base.json)
dlb_smoke(compare_threshold_ambiguous 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json --threshold 5)
dlb_smoke(compare_threshold_text 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json --threshold fast)
dlb_smoke(compare_threshold_negative 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json --threshold -5%)
dlb_smoke(compare_alpha_range 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json --alpha 1.5)
dlb_smoke(compare_time_field 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json --time wall)
dlb_smoke(compare_noise_floor_text 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json --noise-floor fast)
dlb_smoke(compare_noise_floor_few_runs 2 compare ${DLB_CMP_DATA}/base.json ${DLB_CMP_DATA}/base.json --noise-floor ${DLB_CMP_DATA})
dlb_smoke(baseline_no_action 2 baseline)
dlb_smoke(baseline_check_no_dir 2 baseline check ${DLB_CMP_DATA}/base.json)
dlb_smoke(history_min_segment 2 history ${DLB_CMP_DATA} --min-segment 0)
