// One repetition of a case, timed by Google Benchmark's loop: its warm-up, its iteration-count
// prediction (enough iterations to fill min_time, or a fixed count) and its clocks (wall and CPU
// time, or the case's own device time when Case::manual_time()). dlbench decides the rest itself:
// which case runs next, how many repetitions, and their statistics (engine.h, records.h).
#pragma once
#include <optional>
#include <string>

#include <benchmark/benchmark.h>

namespace dlb::bench {
class Case;
}

namespace dlb::harness {

// One repetition of c.run(): `iterations` of them when > 0 (with `warmup` seconds of untimed calls
// first), else as many as fill `min_time` seconds (Google Benchmark's warm-up of `warmup` seconds
// first). An exception from run() ends the repetition as an error run (its message kept;
// "out of memory..." for a failed allocation). nullopt when Google Benchmark reported nothing.
std::optional<benchmark::BenchmarkReporter::Run> time_repetition(bench::Case& c, const std::string& name, long iterations,
                                                                 double min_time, double warmup);

}  // namespace dlb::harness
