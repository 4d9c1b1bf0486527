// `dlbench export RUN --format F [--out FILE]`: a run in a CI tracker's format (export.h).
// `dlbench bisect GOOD BAD --suite S --filter CASE`: the first commit where the case got SLOWER
// (bisect.h). Exit codes: 0 done; 1 export: no case was timed, or an incomplete run; bisect: BAD is
// not slower than GOOD; 2 bad usage or input (one line); 3 bisect: NOISY commits (or ones that did not
// build or run) leave a range of commits, not one.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "harness/bisect.h"
#include "harness/commands.h"
#include "harness/compare.h"
#include "harness/export.h"
#include "harness/results.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"

namespace dlb::harness {

namespace {

struct ExportFlags {
  std::string run, format, out;
  bool allow_incomplete = false;
};

int run_export(const ExportFlags& f) {
  const ExportFormat format = parse_export_format(f.format);
  const auto doc = load_results(f.run);
  const RunState st = run_state(doc);
  if (!st.complete() && !f.allow_incomplete) {
    std::cerr << "dlbench: error: " << f.run << ": incomplete run (" << st.describe()
              << "); finish it with dlbench run --resume, or pass --allow-incomplete\n";
    return 1;
  }
  const auto cases = export_cases(doc, f.run);
  std::size_t timed = 0;
  for (const auto& c : cases) timed += c.state == "timed";
  if (timed == 0) {
    std::cerr << "dlbench: error: " << f.run << ": no case was timed (" << cases.size() << " failed or skipped), nothing to export\n";
    return 1;
  }
  const std::string text = export_text(cases, format, doc);
  if (f.out.empty() || f.out == "-") {
    std::cout << text;
    std::cout.flush();
  } else {
    try {
      write_file_atomically(f.out, text);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("--out: ") + e.what());
    }
  }
  if (timed < cases.size() && format != ExportFormat::csv)
    std::cerr << "dlbench: note: " << cases.size() - timed << " case(s) failed or skipped, left out of the export\n";
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, int& rc) {
  {
    auto f = std::make_shared<ExportFlags>();
    CLI::App* sub = app.add_subcommand("export", "A run's cases in a CI tracker's format: one entry per case (median, spread of "
                                                 "the repetitions, unit), on stdout or --out (docs/trackers.md)");
    sub->add_option("run", f->run, "Results folder, results.json or results.jsonl")->required();
    sub->add_option("--format,-f", f->format, export_format_names())->required();
    sub->add_option("--out,-o", f->out, "File to write (default: stdout)");
    sub->add_flag("--allow-incomplete", f->allow_incomplete, "Export a run that did not finish all its cases");
    sub->callback([f, &rc] { rc = run_export(*f); });
  }
  {
    auto o = std::make_shared<BisectOptions>();
    auto flags = std::make_shared<VerdictFlags>();
    CLI::App* sub = app.add_subcommand(
        "bisect", "Find the first commit between GOOD and BAD where a case is SLOWER than at GOOD (compare's verdict): builds "
                  "each tested commit in a git worktree and runs the case there. Exit 0 found, 1 BAD not slower, 3 NOISY "
                  "commits leave a range");
    sub->add_option("good", o->good, "A commit where the case is fast")->required();
    sub->add_option("bad", o->bad, "A later commit (GOOD is its ancestor) where it is slow")->required();
    sub->add_option("--suite,-s", o->suite, "Suite of the case")->required();
    sub->add_option("--filter", o->filter, "The case: a regular expression on case names, as run --filter")->required();
    sub->add_option("--device,-d", o->device, "Device to run it on")->capture_default_str();
    sub->add_option("--repo", o->repo, "The git repository (default: the current folder's)")->capture_default_str();
    sub->add_option("--out,-o", o->out, "Folder for each tested commit's results and logs (default results/bisect-<time>)");
    sub->add_option("--run-args", o->run_args, "More flags for dlbench run at every commit, e.g. \"-r 9 --min-time 0.2\"");
    sub->add_option("--build-cmd", o->build_cmd, "Shell command that builds the checked-out commit (in its worktree)")
        ->capture_default_str();
    sub->add_option("--run-cmd", o->run_cmd,
                    "Shell command that runs the case (in the worktree) into $DLBENCH_BISECT_OUT; also sees "
                    "$DLBENCH_BISECT_SUITE, _FILTER, _DEVICE, _ARGS, _COMMIT")
        ->capture_default_str();
    sub->add_flag("--keep-worktree", o->keep_worktree, "Leave the worktree (and its build) in place at the end");
    add_verdict_flags(sub, *flags);
    sub->callback([o, flags, &rc] {
      o->compare = verdict_options(*flags);
      rc = run_bisect(*o, std::cout);
    });
  }
}

}  // namespace dlb::harness
