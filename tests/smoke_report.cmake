# Report tests (issue 7): `dlbench report` on the hand-made fixtures in tests/data/report.
#   smoke.report_content    the page's content: fingerprints, lecture table, plots (valid PNGs), CSV/MD,
#                           failed cases shown as failed, comparison, escaping, two suites in one report
#   smoke.report_bad_input  missing folder / no results / truncated / foreign JSON: exit 2, one line
#   smoke.report_chromium   the page rendered in headless Chromium is a real page, not a blank one
#   smoke.report_after_run  `dlbench run` ends by writing RUN_DIR/report/index.html
# The checks run on the Python that has matplotlib and PIL (Debian's; ci/bootstrap.sh test installs them).
if(DEFINED ENV{DLBENCH_PYTHON})
  set(DLB_REPORT_PY $ENV{DLBENCH_PYTHON})
elseif(EXISTS /usr/bin/python3)
  set(DLB_REPORT_PY /usr/bin/python3)
else()
  find_program(DLB_REPORT_PY python3)
endif()
set(DLB_REPORT_DATA ${CMAKE_CURRENT_SOURCE_DIR}/data/report)
set(DLB_REPORT_OUT ${CMAKE_CURRENT_BINARY_DIR}/report-out)

add_test(NAME smoke.report_content
         COMMAND ${DLB_REPORT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/report/check_report.py $<TARGET_FILE:dlbench>
                 ${DLB_REPORT_DATA} ${DLB_REPORT_OUT}/content)
add_test(NAME smoke.report_bad_input
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/bad_input.sh $<TARGET_FILE:dlbench> ${DLB_REPORT_PY}
                 ${DLB_REPORT_DATA} ${DLB_REPORT_OUT}/bad)
add_test(NAME smoke.report_chromium
         COMMAND ${DLB_REPORT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/report/check_screenshot.py $<TARGET_FILE:dlbench>
                 ${DLB_REPORT_DATA} ${DLB_REPORT_OUT}/chromium)
add_test(NAME smoke.report_after_run
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/after_run.sh $<TARGET_FILE:dlbench> ${DLB_REPORT_OUT}/run)
set_tests_properties(smoke.report_content smoke.report_bad_input smoke.report_chromium smoke.report_after_run
                     PROPERTIES LABELS smoke TIMEOUT 600)

# Issue 16: --profile traces, per-layer table, roofline, opening answer, cross-machine crossover
# against the committed GPU fixture (tests/profile/check_profile.py; one quick CPU lecture run).
add_test(NAME smoke.profile_lecture
         COMMAND ${DLB_REPORT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/profile/check_profile.py $<TARGET_FILE:dlbench>
                 ${DLB_REPORT_DATA}/gpu_fixture/lecture.json ${DLB_REPORT_OUT}/profile)
set_tests_properties(smoke.profile_lecture PROPERTIES LABELS smoke TIMEOUT 600)
