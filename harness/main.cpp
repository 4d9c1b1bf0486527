// build/bin/dlbench: the CLI entry point.
#include "harness/commands.h"

int main(int argc, char** argv) { return dlb::harness::cli_main(argc, argv); }
