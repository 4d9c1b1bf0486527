# The data loader from the CLI (issue 30): data make and data load over every form, then Ctrl-C,
# SIGTERM, SIGKILL, a killed and a throwing worker, with no worker process left after any of them.
add_test(NAME smoke.loader_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/loader_cli.sh ${DLB_CLI} ${OUT}/loader-cli)
set_tests_properties(smoke.loader_cli PROPERTIES LABELS smoke TIMEOUT 300)
