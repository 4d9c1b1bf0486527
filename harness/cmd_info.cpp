// `dlbench info [--json] [--peaks]`: the machine fingerprint.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <new>
#include <system_error>

#include "harness/commands.h"
#include "harness/fingerprint.h"
#include "harness/run/run.h"

namespace dlb::harness {

void add_info_command(CLI::App& app, int& rc) {
  auto json_out = std::make_shared<bool>(false);
  auto peaks = std::make_shared<bool>(false);
  CLI::App* info = app.add_subcommand("info", "Print the machine fingerprint: CPU, OpenBLAS, GPUs, CUDA libraries, git");
  info->add_flag("--json", *json_out, "As JSON (the results.json context)");
  info->add_flag("--peaks", *peaks, "Also measure the CPU FMA peak and memory bandwidth (about a second)");
  info->callback([json_out, peaks, &rc] {
    auto fp = fingerprint({"dlbench", "info"});
    if (*peaks) {
      try {  // out of memory (ulimit -v) or no thread to run on: the peaks are unknown, said so
        const Peaks p = measure_cpu_peaks();
        fp["peaks"] = {{"cpu_fp32_gflops", p.cpu_fp32_gflops},
                       {"cpu_mem_gb_per_s", p.cpu_mem_gb_per_s},
                       {"cpu_fma_isa", p.cpu_fma_isa},
                       {"threads", p.threads}};
      } catch (const std::bad_alloc&) {
        fp["peaks"] = {{"error", "out of memory"}};
      } catch (const std::system_error& e) {
        fp["peaks"] = {{"error", std::string("out of memory (") + e.what() + ")"}};
      }
    }
    if (*json_out) std::cout << fp.dump(2) << "\n";
    else std::cout << fingerprint_text(fp);
    rc = 0;
  });
}

}  // namespace dlb::harness
