# Issue 12: the GitHub workflows validate against GitHub's schema (check-jsonschema, installed by
# ci/bootstrap.sh test), a broken one is rejected, the GPU job keeps its runner guard.
add_test(NAME smoke.workflows_schema COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/workflows_schema.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(smoke.workflows_schema PROPERTIES LABELS smoke TIMEOUT 120)
