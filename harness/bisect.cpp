// Bisection of a slowdown over git history (see bisect.h): git and the build and run commands are
// child processes (kernels/common/child.h: signals reach them); the predicate is compare_runs.
#include "harness/bisect.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "harness/results.h"
#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"

namespace fs = std::filesystem;

namespace dlb::harness {

using json = nlohmann::json;

std::size_t next_probe(const std::vector<Mark>& marks) {
  const auto first_slow = std::find(marks.begin(), marks.end(), Mark::slower);
  if (first_slow == marks.end()) return kNoProbe;
  const long hi = first_slow - marks.begin();
  long lo = hi - 1;
  while (lo >= 0 && marks[static_cast<std::size_t>(lo)] != Mark::good) --lo;
  const double mid = 0.5 * static_cast<double>(lo + hi);
  std::size_t best = kNoProbe;
  for (long i = lo + 1; i < hi; ++i)  // the untested one nearest the middle (the earlier on a tie)
    if (marks[static_cast<std::size_t>(i)] == Mark::untested &&
        (best == kNoProbe || std::fabs(static_cast<double>(i) - mid) < std::fabs(static_cast<double>(best) - mid)))
      best = static_cast<std::size_t>(i);
  return best;
}

std::vector<std::size_t> suspects(const std::vector<Mark>& marks) {
  const auto first_slow = std::find(marks.begin(), marks.end(), Mark::slower);
  if (first_slow == marks.end()) return {};
  const long hi = first_slow - marks.begin();
  long lo = hi - 1;
  while (lo >= 0 && marks[static_cast<std::size_t>(lo)] != Mark::good) --lo;
  std::vector<std::size_t> out;
  for (long i = lo + 1; i <= hi; ++i) out.push_back(static_cast<std::size_t>(i));
  return out;
}

namespace {

bool ok(int status) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string first_line(const std::string& s) {
  std::string t = s.substr(0, s.find('\n'));
  return t.size() > 200 ? t.substr(0, 200) + "..." : t;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// git -C DIR ARGS...: its exit status and output (stdout and stderr together).
int git(const std::string& dir, std::vector<std::string> args, std::string* output) {
  args.insert(args.begin(), {"git", "-C", dir});
  const int st = run_child(args, {}, {}, output);
  if (st < 0) throw UsageError("bisect: cannot run git (" + first_line(*output) + ")");
  return st;
}

std::string resolve(const std::string& top, const std::string& rev, const char* what) {
  std::string out;
  if (rev.empty() || rev[0] == '-') throw UsageError(std::string(what) + " '" + rev + "': not a commit");
  if (!ok(git(top, {"rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}"}, &out)))
    throw InputError(std::string(what) + " '" + rev + "': no such commit in " + top);
  return trimmed(out);
}

// The worktree the commits are built in: added detached at GOOD, removed again at the end.
class Worktree {
 public:
  Worktree(const std::string& top, const std::string& commit, bool keep) : top_(top), keep_(keep) {
    const char* tmp = std::getenv("TMPDIR");
    std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlbench-bisect-XXXXXX";
    if (!::mkdtemp(t.data())) throw std::runtime_error("bisect: cannot make a temporary folder from " + t);
    base_ = t;
    path_ = base_ + "/src";
    std::string out;
    if (!ok(git(top_, {"worktree", "add", "--detach", "--quiet", path_, commit}, &out))) {
      std::error_code ec;
      fs::remove_all(base_, ec);
      throw std::runtime_error("bisect: git worktree add failed: " + first_line(out));
    }
  }
  ~Worktree() {
    if (keep_) return;
    try {
      std::string out;
      git(top_, {"worktree", "remove", "--force", path_}, &out);
      std::error_code ec;
      fs::remove_all(base_, ec);
      git(top_, {"worktree", "prune"}, &out);
    } catch (const std::exception&) {  // git gone: nothing more to undo
    }
  }
  Worktree(const Worktree&) = delete;
  Worktree& operator=(const Worktree&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string top_, base_, path_;
  bool keep_;
};

struct Probe {
  Mark mark = Mark::undecided;
  std::string what;  // "SLOWER +31.2% (p 0.004)", "build failed (log: ...)", ...
};

class Bisector {
 public:
  Bisector(const BisectOptions& o, std::string out, const Worktree& wt) : o_(o), out_(std::move(out)), wt_(wt) {}

  // Builds and runs `sha` (the k-th of the session) into OUT/<k>-<sha>/; its results document, or
  // null with *why set.
  json measure(const std::string& sha, std::size_t k, std::string* why) {
    char tag[32];
    std::snprintf(tag, sizeof tag, "%02zu-", k);
    const std::string dir = out_ + "/" + tag + sha.substr(0, 10);
    fs::create_directories(dir);
    std::string log;
    if (!ok(git(wt_.path(), {"checkout", "--quiet", "--detach", "--force", sha}, &log)) ||
        !ok(git(wt_.path(), {"clean", "-fdq"}, &log))) {
      *why = "checkout failed: " + first_line(log);
      return nullptr;
    }
    const std::vector<std::string> env = {"DLBENCH_BISECT_SRC=" + wt_.path(), "DLBENCH_BISECT_OUT=" + dir + "/results",
                                          "DLBENCH_BISECT_SUITE=" + o_.suite, "DLBENCH_BISECT_FILTER=" + o_.filter,
                                          "DLBENCH_BISECT_DEVICE=" + o_.device, "DLBENCH_BISECT_ARGS=" + o_.run_args,
                                          "DLBENCH_BISECT_COMMIT=" + sha};
    auto shell = [&](const std::string& cmd, const std::string& log_name) {
      const int st = run_child({"/bin/sh", "-c", "cd \"$DLBENCH_BISECT_SRC\" && {\n" + cmd + "\n}"}, env, {}, &log);
      write_file_atomically(dir + "/" + log_name, log);
      if (interrupt_requested()) throw Interrupted("bisect interrupted");
      return ok(st);
    };
    if (!shell(o_.build_cmd, "build.log")) {
      *why = "build failed (log: " + dir + "/build.log)";
      return nullptr;
    }
    const bool ran = shell(o_.run_cmd, "run.log");  // exit 1 = a case failed: its results still count
    try {
      return load_results(dir + "/results");
    } catch (const InputError& e) {
      *why = std::string(ran ? "run wrote no results" : "run failed") + " (log: " + dir + "/run.log; " + first_line(e.what()) + ")";
      return nullptr;
    }
  }

  Probe judge(const json& good, const json& doc, const std::string& sha) {
    const Comparison c = compare_runs(good, "GOOD", doc, sha.substr(0, 10), o_.compare);
    Probe p;
    const CaseComparison* worst = nullptr;
    bool failed = false, noisy = false;
    for (const auto& cc : c.cases) {
      if (cc.verdict == Verdict::failed) failed = true;
      if (cc.verdict == Verdict::noisy) noisy = true;
      if (cc.verdict == Verdict::slower && (!worst || cc.ratio > worst->ratio)) worst = &cc;
    }
    auto detail = [](const CaseComparison& cc) {
      std::ostringstream s;
      s << verdict_name(cc.verdict) << " " << fmt_change(cc.ratio);
      if (std::isfinite(cc.p)) s << " (p " << std::setprecision(2) << cc.p << ")";
      return s.str();
    };
    if (worst) p.mark = Mark::slower, p.what = detail(*worst);
    else if (failed) p.what = "FAILED (a case failed: undecided)";
    else if (noisy) {
      for (const auto& cc : c.cases)
        if (cc.verdict == Verdict::noisy) p.what = detail(cc) + ": undecided";
    } else if (c.shared == 0) p.what = "the case was not timed: undecided";
    else {
      p.mark = Mark::good;
      const CaseComparison* most = &c.cases.front();
      for (const auto& cc : c.cases)
        if (std::isfinite(cc.ratio) && !(cc.ratio <= most->ratio)) most = &cc;
      p.what = detail(*most);
    }
    return p;
  }

 private:
  const BisectOptions& o_;
  std::string out_;
  const Worktree& wt_;
};

std::string default_out() {
  char b[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(b, sizeof b, "results/bisect-%Y%m%d-%H%M%S", &tm);
  return b;
}

}  // namespace

int run_bisect(const BisectOptions& o, std::ostream& out) {
  if (o.suite.empty() || o.filter.empty()) throw UsageError("bisect: --suite and --filter name the case");
  std::string top, log;
  if (!ok(git(o.repo, {"rev-parse", "--show-toplevel"}, &top)))
    throw InputError("--repo " + o.repo + ": not a git repository (" + first_line(top) + ")");
  top = trimmed(top);
  const std::string good = resolve(top, o.good, "GOOD"), bad = resolve(top, o.bad, "BAD");
  if (good == bad) throw UsageError("bisect: GOOD and BAD are the same commit (" + good.substr(0, 10) + ")");
  if (!ok(git(top, {"merge-base", "--is-ancestor", good, bad}, &log)))
    throw InputError("bisect: GOOD " + o.good + " is not an ancestor of BAD " + o.bad +
                     " (GOOD must be older, on BAD's history; swapped?)");
  if (!ok(git(top, {"status", "--porcelain", "--untracked-files=no"}, &log)) || !trimmed(log).empty())
    throw InputError(top + ": the worktree has uncommitted changes; bisect builds commits, never them: commit or stash first");
  git(top, {"rev-list", "--reverse", "--first-parent", "--ancestry-path", good + ".." + bad}, &log);
  std::vector<std::string> cands;
  std::istringstream lines(log);
  for (std::string l; std::getline(lines, l);)
    if (l.size() == 40 && l.find_first_not_of("0123456789abcdef") == std::string::npos) cands.push_back(l);
  if (cands.empty() || cands.back() != bad)
    throw InputError("bisect: BAD " + o.bad + " is not on a first-parent line from GOOD " + o.good);

  const std::string dir = o.out.empty() ? default_out() : o.out;
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw UsageError("--out " + dir + ": holds files already (bisect writes a fresh folder)");
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("--out " + dir + ": cannot create it (" + ec.message() + ")");
  const std::string absdir = fs::absolute(dir).lexically_normal().string();

  InterruptScope scope("\ndlbench: interrupted -- stopping bisect (again to quit now)\n");
  const Worktree wt(top, good, o.keep_worktree);
  Bisector b(o, absdir, wt);
  auto subject = [&](const std::string& sha) {
    std::string s;
    git(top, {"log", "-1", "--format=%s", sha}, &s);
    return first_line(trimmed(s));
  };
  out << "bisect: " << cands.size() << " commit(s) after GOOD " << good.substr(0, 10) << " up to BAD " << bad.substr(0, 10)
      << "; results and logs in " << absdir << (o.keep_worktree ? "; worktree " + wt.path() : "") << "\n";
  out.flush();

  std::string why;
  const json ref = b.measure(good, 0, &why);
  if (ref.is_null()) throw InputError("bisect: GOOD " + good.substr(0, 10) + ": " + why);
  std::size_t timed = 0;
  for (const auto& c : extract_cases(ref, "GOOD"))
    timed += c.state == CaseRun::State::timed;
  if (timed == 0) throw InputError("bisect: --filter '" + o.filter + "' timed no case at GOOD " + good.substr(0, 10));
  out << "  GOOD  " << good.substr(0, 10) << "  reference (" << timed << " case(s))  " << subject(good) << "\n";

  std::vector<Mark> marks(cands.size(), Mark::untested);
  std::vector<std::string> what(cands.size());
  std::size_t k = 1;
  auto probe = [&](std::size_t i) {
    const json doc = b.measure(cands[i], k++, &why);
    Probe p;
    if (doc.is_null()) p.what = why + ": undecided";
    else p = b.judge(ref, doc, cands[i]);
    marks[i] = p.mark, what[i] = p.what;
    out << "  " << (i + 1 == cands.size() ? "BAD " : "    ") << "  " << cands[i].substr(0, 10) << "  " << p.what << "  "
        << subject(cands[i]) << "\n";
    out.flush();
  };
  probe(cands.size() - 1);
  if (marks.back() != Mark::slower) {
    out << "BAD is not SLOWER than GOOD (" << what.back() << "): nothing to bisect\n";
    return marks.back() == Mark::good ? 1 : 3;
  }
  for (std::size_t i; (i = next_probe(marks)) != kNoProbe;) probe(i);
  const auto s = suspects(marks);
  if (s.size() == 1) {
    out << "first SLOWER commit: " << cands[s[0]] << "  " << subject(cands[s[0]]) << "\n";
    return 0;
  }
  out << "undecided: the first SLOWER commit is one of these " << s.size() << ":\n";
  for (auto i : s) out << "  " << cands[i] << "  " << (what[i].empty() ? "untested" : what[i]) << "  " << subject(cands[i]) << "\n";
  return 3;
}

}  // namespace dlb::harness
