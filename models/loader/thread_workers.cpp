// Thread workers, and what every worker does with a task (see workers.h).
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

#include "kernels/common/errors.h"
#include "models/loader/workers.h"

namespace dlb::models::loader {

namespace {

void say(Done* d, const std::string& s) { std::snprintf(d->message, sizeof d->message, "%s", s.c_str()); }

class ThreadWorkers : public WorkerPool {
 public:
  ThreadWorkers(int n, const Source& src, const MakerConfig& cfg, const SlotArena& slots, const Fault& fault)
      : src_(src), cfg_(cfg), slots_(slots), fault_(fault), queues_(static_cast<std::size_t>(n)) {
    for (int k = 0; k < n; ++k) threads_.emplace_back([this, k] { loop(k); });
  }
  ~ThreadWorkers() override { stop(); }
  int size() const override { return static_cast<int>(queues_.size()); }
  void submit(int worker, const Task& t) override {
    {
      std::lock_guard<std::mutex> g(m_);
      queues_[static_cast<std::size_t>(worker)].push_back(t);
    }
    task_cv_.notify_all();
  }
  bool wait(Done* d, int timeout_ms) override {
    std::unique_lock<std::mutex> g(m_);
    if (!done_cv_.wait_for(g, std::chrono::milliseconds(timeout_ms), [this] { return !done_.empty(); })) return false;
    *d = done_.front();
    done_.pop_front();
    return true;
  }
  void stop() override {
    {
      std::lock_guard<std::mutex> g(m_);
      stop_ = true;
    }
    task_cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  void loop(int k) {
    BatchMaker maker(src_, cfg_);
    auto& q = queues_[static_cast<std::size_t>(k)];
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> g(m_);
        task_cv_.wait(g, [&] { return stop_ || !q.empty(); });
        if (stop_) return;
        t = q.front();
        q.pop_front();
      }
      Done d;
      run_task(maker, slots_, t, k, fault_, false, &d);
      {
        std::lock_guard<std::mutex> g(m_);
        done_.push_back(d);
      }
      done_cv_.notify_all();
    }
  }

  const Source& src_;
  MakerConfig cfg_;
  const SlotArena& slots_;
  Fault fault_;
  std::mutex m_;
  std::condition_variable task_cv_, done_cv_;
  std::vector<std::deque<Task>> queues_;
  std::deque<Done> done_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

}  // namespace

WorkerMode parse_worker_mode(const std::string& s) {
  if (s == "thread") return WorkerMode::thread;
  if (s == "process") return WorkerMode::process;
  throw UsageError("mode '" + s + "': expected thread or process");
}

const char* worker_mode_name(WorkerMode m) { return m == WorkerMode::thread ? "thread" : "process"; }

Fault Fault::from_env() {
  Fault f;
  const char* v = std::getenv("DLBENCH_LOADER_FAULT");
  if (!v || !*v) return f;
  const std::string s = v;
  const auto at = s.find('@');
  const std::string kind = s.substr(0, at);
  char* end = nullptr;
  const long long b = at == std::string::npos ? -1 : std::strtoll(s.c_str() + at + 1, &end, 10);
  if (at == std::string::npos || b < 0 || !end || *end || (kind != "throw" && kind != "exit" && kind != "crash"))
    throw UsageError("DLBENCH_LOADER_FAULT='" + s + "': expected throw@B, exit@B or crash@B (B a batch number)");
  f.kind = kind == "throw" ? throw_ : kind == "exit" ? exit_ : crash;
  f.batch = b;
  return f;
}

void run_task(BatchMaker& m, const SlotArena& slots, const Task& t, int worker, const Fault& fault, bool in_process, Done* d) {
  d->worker = worker, d->slot = t.slot, d->epoch = t.epoch, d->batch = t.batch;
  d->status = Done::ok;
  d->message[0] = 0;
  try {
    if (fault.kind != Fault::none && fault.batch == t.batch) {
      if (in_process && fault.kind == Fault::exit_) ::_exit(3);
      if (in_process && fault.kind == Fault::crash) {  // a real death by SIGSEGV, also under a sanitizer's handler
        ::signal(SIGSEGV, SIG_DFL);
        ::raise(SIGSEGV);
      }
      throw std::runtime_error("injected fault at batch " + std::to_string(t.batch) + " (DLBENCH_LOADER_FAULT)");
    }
    m.make(t.epoch, t.batch, slots.slot(t.slot));
  } catch (const InputError& e) {
    d->status = Done::bad_input;
    say(d, e.what());
  } catch (const std::bad_alloc&) {
    d->status = Done::failed;
    say(d, "out of memory");
  } catch (const std::exception& e) {
    d->status = Done::failed;
    say(d, e.what());
  }
}

std::unique_ptr<WorkerPool> start_thread_workers(int n, const Source& src, const MakerConfig& cfg, const SlotArena& slots,
                                                 const Fault& fault) {
  return std::make_unique<ThreadWorkers>(n, src, cfg, slots, fault);
}

}  // namespace dlb::models::loader
