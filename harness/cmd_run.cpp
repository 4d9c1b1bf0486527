// `dlbench run` and `dlbench list`. The suite flags (--sizes, --batch, ...) come from the suites'
// declarations (bench/suite.h): one command-line option per flag name over all suites.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "bench/suite.h"
#include "harness/commands.h"
#include "harness/dist.h"
#include "harness/run/plan.h"
#include "harness/run/run.h"
#include "harness/sweep.h"
#include "harness/tables.h"
#include "kernels/common/errors.h"
#include "kernels/common/verify.h"

namespace dlb::harness {

namespace {
struct RunFlags {
  std::string suite = "lecture", device = "all", out, filter;
  std::string repetitions, min_time, ranks;
  bool quick = false, no_report = false, list = false, no_interleave = false;
  std::string seed;
  std::map<std::string, std::string> values;  // suite flags with a value, by name
  std::map<std::string, bool> switches;       // suite flags without one
  std::set<std::string> given;                // the flags given on the command line (an empty value counts)
};

// The options of `sub` that were given, by their long name.
std::set<std::string> given_flags(const CLI::App* sub) {
  std::set<std::string> out;
  for (const CLI::Option* o : sub->get_options())
    if (o->count() > 0 && !o->get_lnames().empty()) out.insert("--" + o->get_lnames().front());
  return out;
}

// Every flag some suite declares, once per name (the first declaration's help).
std::vector<const bench::FlagSpec*> suite_flags() {
  std::vector<const bench::FlagSpec*> out;
  for (const bench::Suite* s : bench::all_suites())
    for (const auto& f : s->flags)
      if (std::none_of(out.begin(), out.end(), [&](const bench::FlagSpec* x) { return x->name == f.name; })) out.push_back(&f);
  return out;
}

// A flag's help: its one text, or, where suites declare it with different texts (--model: amp's
// models, seq's), each text after the suites that give it ("amp: ...; seq, gpt2: ...").
std::string flag_help(const std::string& name) {
  std::vector<std::pair<std::string, std::string>> texts;  // help -> the suites giving it, in order
  for (const bench::Suite* s : bench::all_suites())
    for (const auto& f : s->flags) {
      if (f.name != name) continue;
      auto it = std::find_if(texts.begin(), texts.end(), [&](const auto& t) { return t.first == f.help; });
      if (it == texts.end()) texts.push_back({f.help, s->name});
      else it->second += ", " + s->name;
    }
  if (texts.size() == 1) return texts.front().first;
  std::string out;
  for (const auto& [help, suites] : texts) out += (out.empty() ? "" : "; ") + suites + ": " + help;
  return out;
}

void add_common(CLI::App* sub, RunFlags& f) {
  sub->add_option("--suite,-s", f.suite, "Suite(s), comma-separated, or 'all' (default: lecture)");
  sub->add_option("--device,-d", f.device, "cpu | cuda | cuda:N | all, comma-separated (default: all)");
  sub->add_flag("--quick,-q", f.quick, "CI scale: small sweeps, fewer repetitions");
  sub->add_option("--filter", f.filter, "Only cases whose name matches this regular expression");
  for (const bench::FlagSpec* spec : suite_flags()) {
    if (spec->parse == bench::FlagSpec::Parse::on) sub->add_flag(spec->name, f.switches[spec->name], flag_help(spec->name));
    else sub->add_option(spec->name, f.values[spec->name], flag_help(spec->name));
  }
}

// A suite flag's value. Suites that parse one flag differently (--sizes: plain for matmul, with
// units for transfer) agree on the plain integers when run together.
nlohmann::json parse_flag(const bench::FlagSpec& spec, const std::string& text) {
  using P = bench::FlagSpec::Parse;
  const std::string& flag = spec.name;
  auto choice_list = [&] {
    std::string s;
    for (std::size_t i = 0; i < spec.choices.size(); ++i)
      s += (i == 0 ? "" : i + 1 == spec.choices.size() ? " or " : ", ") + spec.choices[i];
    return s;
  };
  switch (spec.parse) {
    case P::ints: return parse_list(text, flag, false, spec.max);
    case P::bytes: return parse_list(text, flag, true, spec.max);
    case P::size_sweep: return parse_size_sweep(text);
    case P::dtypes: {
      auto words = parse_words(text, flag);
      for (const auto& w : words) {
        try {
          parse_dtype(w);
        } catch (const UsageError& e) {
          throw UsageError(flag + ": " + e.what());
        }
      }
      return words;
    }
    case P::words: {
      const auto words = parse_words(text, flag);
      for (const auto& w : words)
        if (std::find(spec.choices.begin(), spec.choices.end(), w) == spec.choices.end())
          throw UsageError(flag + " '" + w + "': unknown value (expected " + choice_list() + ")");
      if (words.size() > 1 && std::find(words.begin(), words.end(), "all") != words.end())
        throw UsageError(flag + " '" + text + "': 'all' already holds every value");
      return words;
    }
    case P::word:
      if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end())
        throw UsageError(flag + " '" + text + "': unknown value (expected " + choice_list() + ")");
      return text;
    case P::on: return true;
    case P::counts: return parse_list(text, flag, false, spec.max, /*allow_zero*/ true);
    case P::text:
      if (text.empty()) throw UsageError(flag + ": empty value");
      return text;
  }
  return nullptr;
}

// The suite flags given, checked against the suites chosen (a flag that a chosen suite does not take
// is refused, naming the suite: a silently ignored --sizes runs a different sweep than the one asked
// for), parsed into axis overrides and extras.
void apply_suite_flags(const RunFlags& f, RunOptions& o) {
  for (const bench::FlagSpec* any : suite_flags()) {
    const std::string& flag = any->name;
    if (!f.given.count(flag)) continue;
    std::vector<const bench::FlagSpec*> specs;
    for (const auto& name : o.suites) {
      const bench::Suite& s = suite_named(name);
      const bench::FlagSpec* spec = s.flag_named(flag);
      if (!spec) {
        std::string list;
        for (const auto& u : s.flags) list += (list.empty() ? "" : ", ") + u.name;
        throw UsageError(flag + ": suite " + s.name + " does not use it (its flags: " + (list.empty() ? "none" : list) + ")");
      }
      specs.push_back(spec);
    }
    bench::FlagSpec spec = *specs.front();
    for (const auto* s : specs)
      if (s->parse != spec.parse) spec.parse = bench::FlagSpec::Parse::ints;
    const bool on = spec.parse == bench::FlagSpec::Parse::on;
    if (on && !f.switches.at(flag)) continue;
    const nlohmann::json v = parse_flag(spec, on ? "" : f.values.at(flag));
    (spec.axis ? o.overrides : o.extra)[spec.key] = v;
  }
}

RunOptions to_options(const RunFlags& f, const std::vector<std::string>& argv) {
  RunOptions o;
  if (f.suite == "all") {
    o.suites.clear();
    for (const bench::Suite* s : bench::all_suites()) o.suites.push_back(s->name);
  } else {
    o.suites = parse_words(f.suite, "--suite");
    if (o.suites.size() > 1 && std::find(o.suites.begin(), o.suites.end(), "all") != o.suites.end())
      throw UsageError("--suite '" + f.suite + "': 'all' already holds every suite");
    for (const auto& s : o.suites) suite_named(s);
  }
  apply_suite_flags(f, o);
  o.device = f.device;
  o.quick = f.quick;
  if (f.given.count("--repetitions")) o.repetitions = static_cast<int>(parse_int(f.repetitions, "--repetitions", 1, 1000));
  if (f.given.count("--min-time")) o.min_time = parse_real(f.min_time, "--min-time", 1e-6, 3600.0);
  if (f.given.count("--filter") && f.filter.empty()) throw UsageError("--filter: empty regular expression");
  if (f.given.count("--out") && f.out.empty()) throw UsageError("--out: empty folder name");
  o.out = f.out;
  o.filter = f.filter;
  o.report = !f.no_report;
  o.list_only = f.list;
  o.argv = argv;
  return o;
}

// `dlbench list`: each suite with its axes (default; --quick) and flags, from its declaration.
void print_suites(std::ostream& out) {
  auto values = [](const nlohmann::json& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + (x.is_string() ? x.get<std::string>() : x.dump());
    return s.empty() ? std::string("(none)") : s;
  };
  for (const bench::Suite* s : bench::all_suites()) {
    out << s->name << (s->name == "lecture" ? " (default)" : "") << ": " << s->description << "\n";
    for (const auto& a : s->axes) {
      out << "  " << a.name << " = " << values(a.values);
      if (!a.quick.is_null() && a.quick != a.values) out << "  (--quick: " << values(a.quick) << ")";
      out << "\n";
    }
    std::string flags;
    for (const auto& fl : s->flags) flags += " " + fl.name;
    out << "  flags:" << (flags.empty() ? " none" : flags) << (s->distributed ? " --ranks" : "") << "\n\n";
  }
}
}  // namespace

void add_run_command(CLI::App& app, int& rc) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Run suites: verify every case, time it, write results and tables");
  add_common(run, *f);
  run->add_option("--repetitions,-r", f->repetitions, "Repetitions per case, 1..1000 (default 5)");
  run->add_option("--min-time", f->min_time, "Minimum seconds per repetition, 1e-6..3600 (default 0.1, --quick 0.02)");
  auto* out = run->add_option("--out,-o", f->out, "Results folder (default results/<timestamp>-<host>); one that holds results is refused");
  auto resume = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto* res = run->add_option("--resume", *resume, "Finish the interrupted run in DIR: its finished cases are kept (same flags, or none)");
  auto* frc = run->add_flag("--force", *force, "Replace the results already in --out");
  res->excludes(out)->excludes(frc);
  run->add_flag("--no-interleave", f->no_interleave,
                "Time each case's repetitions back to back (default: cases set up together, timed in shuffled rounds)");
  auto* seed = run->add_option("--seed", f->seed, "Seed of the rounds' shuffle, 0..2^64-1 (default: random; recorded in the results)");
  run->add_flag("--no-report", f->no_report, "Do not write the HTML report at the end");
  run->add_flag("--list", f->list, "Print the cases that would run, and run nothing");
  run->add_option("--ranks", f->ranks, "Suites across ranks (dist): run N ranks, 1..1024 (re-launches itself under mpirun)");
  run->callback([f, run, resume, force, seed, &rc] {
    f->given = given_flags(run);
    if (!f->no_report) check_python_runs_report();  // before hours of cases, not after
    else if (f->given.count("--peer")) check_python_env();
    std::vector<std::string> args = {"dlbench", "run"};
    RunOptions o = to_options(*f, args);
    o.interleave = !f->no_interleave;
    o.seed_given = seed->count() > 0;
    if (o.seed_given) {
      const std::string& v = f->seed;
      errno = 0;
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || *end || errno == ERANGE)
        throw UsageError("--seed '" + v + "': expected a whole number from 0 to 18446744073709551615");
      o.seed = n;
    }
    if (*force) o.out_mode = OutMode::force;
    bool across_ranks = false;
    for (const auto& s : o.suites) across_ranks |= suite_named(s).distributed;
    if (!resume->empty()) {
      o.out_mode = OutMode::resume;
      o.out = *resume;
      // No flag that shapes the case set or the timing: take the interrupted run's own.
      o.stored_options = true;
      for (const char* flag : {"--suite", "--device", "--quick", "--filter", "--repetitions", "--min-time", "--no-interleave"})
        if (f->given.count(flag)) o.stored_options = false;
      for (const bench::FlagSpec* spec : suite_flags())
        if (f->given.count(spec->name)) o.stored_options = false;
    } else if (run->count("--resume") > 0) {
      throw UsageError("--resume: expected a results folder");
    }
    const int ranks = f->given.count("--ranks") ? static_cast<int>(parse_int(f->ranks, "--ranks", 1, 1024)) : 0;
    if (ranks != 0 && !across_ranks) throw UsageError("--ranks: only suite dist runs across ranks (add --suite dist)");
    if (across_ranks && o.out_mode == OutMode::resume) throw UsageError("--resume: suite dist runs are not resumable; run it again");
    rc = across_ranks ? run_distributed(o, ranks) : run_suites(o);
  });

  auto lf = std::make_shared<RunFlags>();
  lf->suite = "";
  CLI::App* list = app.add_subcommand("list", "List the suites with their axes and flags, or the cases one would run (--suite ...)");
  add_common(list, *lf);
  list->callback([lf, list, &rc] {
    lf->given = given_flags(list);
    if (!lf->given.count("--suite")) {
      for (const auto& flag : lf->given)
        throw UsageError("list " + flag + ": give --suite too (without it, list prints the suites)");
      print_suites(std::cout);
      rc = 0;
      return;
    }
    RunFlags copy = *lf;
    copy.list = true;
    rc = run_suites(to_options(copy, {"dlbench", "list"}));
  });
}

}  // namespace dlb::harness
