# Results are never lost or mixed (issue 13): folder safety, the lock, resume, run state, signals and
# child processes (tests/results_safety.sh), and the fault test: 20 kills of a sweep, each resumed
# (tests/fault_resume.sh). Every test has its own work folder under smoke-out/.
foreach(mode refuse lock unique resume incomplete signals child)
  add_test(NAME smoke.results_${mode}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/results_safety.sh ${mode} $<TARGET_FILE:dlbench> ${OUT}/results_${mode})
  set_tests_properties(smoke.results_${mode} PROPERTIES LABELS smoke TIMEOUT 180 SKIP_RETURN_CODE 77)
endforeach()
add_test(NAME smoke.fault_kill_resume
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fault_resume.sh $<TARGET_FILE:dlbench> ${OUT}/fault 20)
set_tests_properties(smoke.fault_kill_resume PROPERTIES LABELS smoke TIMEOUT 180)
# Issue 27: the files dlbench reads and writes: hard-linked snapshots, symlinked locks, FIFOs and
# devices, out-of-plan records, stored options, deep JSON, ulimit -f, signals to the report child.
foreach(mode snapshot lock plan force special header deep fsize full report)
  add_test(NAME smoke.files_${mode}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/results_files.sh ${mode} $<TARGET_FILE:dlbench> ${OUT}/files_${mode})
  set_tests_properties(smoke.files_${mode} PROPERTIES LABELS smoke TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
