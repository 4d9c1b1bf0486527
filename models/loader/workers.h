// The loader's workers: N threads or N processes, each making whole batches (maker.h) into the
// shared slots (slots.h) as told, and saying when each is done or why it failed. Processes are
// forked (PyTorch's default start method on Linux), so they share the opened dataset copy-on-write;
// they die with the loader (PR_SET_PDEATHSIG), ignore SIGINT (the loader stops them) and are killed
// and reaped when the pool stops: no orphan outlives a run.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/loader/maker.h"

namespace dlb::models::loader {

enum class WorkerMode { thread, process };
WorkerMode parse_worker_mode(const std::string& s);  // UsageError on anything else
const char* worker_mode_name(WorkerMode m);

struct Task {
  std::int64_t epoch = 0, batch = 0;
  std::int32_t slot = 0, pad_ = 0;
};

struct Done {
  enum Status : std::int32_t { ok = 0, bad_input = 1, failed = 2, died = 3 };
  std::int32_t worker = 0, slot = 0;
  std::int64_t epoch = 0, batch = 0;
  Status status = ok;
  char message[500] = {0};  // one line; a record stays under PIPE_BUF, so a pipe write is atomic
};

// A test hook (DLBENCH_LOADER_FAULT=throw@B | exit@B | crash@B): the worker given batch B of any
// epoch throws, exits with status 3, or dies of SIGSEGV; in thread workers all three throw.
struct Fault {
  enum Kind { none, throw_, exit_, crash } kind = none;
  std::int64_t batch = -1;
  static Fault from_env();  // UsageError on a malformed value
};

class WorkerPool {
 public:
  virtual ~WorkerPool() = default;
  virtual int size() const = 0;
  virtual void submit(int worker, const Task& t) = 0;
  // The next finished task, waiting at most timeout_ms; false when none finished in that time.
  virtual bool wait(Done* d, int timeout_ms) = 0;
  // Ends every worker: threads finish their batch and are joined; processes are killed and reaped.
  virtual void stop() = 0;
  virtual std::vector<int> pids() const { return {}; }
};

std::unique_ptr<WorkerPool> start_thread_workers(int n, const Source& src, const MakerConfig& cfg, const SlotArena& slots,
                                                 const Fault& fault);
std::unique_ptr<WorkerPool> start_process_workers(int n, const Source& src, const MakerConfig& cfg, const SlotArena& slots,
                                                  const Fault& fault);

// One task in the calling thread (or process): the batch made, or what went wrong in *d.
void run_task(BatchMaker& m, const SlotArena& slots, const Task& t, int worker, const Fault& fault, bool in_process, Done* d);

}  // namespace dlb::models::loader
