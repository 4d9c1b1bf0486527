# CI trackers (issue 32), included by tests/CMakeLists.txt:
#   smoke.trackers_exports    the exports of a real run (smoke.compare_setup's run a) read the way
#                             github-action-benchmark, Bencher, Google Benchmark's compare.py and
#                             Conbench's adapter read them (tests/trackers/check_exports.py)
#   smoke.trackers_dashboard  history --html over 200 run folders of 3 machines, rendered in Chromium
#   smoke.trackers_bisect     bisect on scratch repositories of a tiny program (planted slowdown, a
#                             NOISY commit, bad input)
#   smoke.trackers_history_store  ci/history_store.sh against a local bare repository
# DLB_REPORT_PY (smoke_report.cmake): the Python with PIL and scipy (Debian's).
add_test(NAME smoke.trackers_exports
         COMMAND ${DLB_REPORT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/trackers/check_exports.py $<TARGET_FILE:dlbench> ${OUT}/compare/a
                 ${OUT}/trackers/exports ${CMAKE_SOURCE_DIR})
set_tests_properties(smoke.trackers_exports PROPERTIES LABELS smoke TIMEOUT 300 FIXTURES_REQUIRED dlb_compare_runs)
add_test(NAME smoke.trackers_dashboard
         COMMAND ${DLB_REPORT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/trackers/check_dashboard.py $<TARGET_FILE:dlbench> ${OUT}/trackers/dashboard)
add_test(NAME smoke.trackers_bisect
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/trackers/bisect_smoke.sh $<TARGET_FILE:dlbench> ${OUT}/trackers/bisect)
add_test(NAME smoke.trackers_history_store
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/trackers/history_store.sh $<TARGET_FILE:dlbench> ${OUT}/trackers/history-store)
set_tests_properties(smoke.trackers_dashboard smoke.trackers_bisect smoke.trackers_history_store PROPERTIES LABELS smoke TIMEOUT 300)
