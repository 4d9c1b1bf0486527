// Ours against a peer, round by round: in an interleaved run (docs/timing.md) repetition k of every
// case of a window is timed in round k, so ours' repetition k over the peer's repetition k is a
// ratio whose two sides saw the same load. Suites derive it over their finished entries
// (Suite::derive) and print "median (range)" in their tables.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "bench/case.h"  // json

namespace dlb::bench {

// On every entry of impl `ours` carrying `rate` (a throughput: tokens_per_s, ...) whose point (point(e);
// "": not compared) has an entry of impl `peer` carrying it (rates, not times: the two may time a
// different amount of work per iteration):
//   each repetition: key = ours' rate / the peer's in the same repetition_index;
//   the summary (median, or the only repetition): key = the median of those paired ratios and
//   key + "_range" = [lowest, highest] of them; without a pair, key = ours' median rate / the peer's.
// The headline is the pairs' median, not the medians' ratio: a case that got extra repetitions (a
// noisy one, stopping.h) has a median over rounds the other did not run, and its ratio put the lstm's
// 1.77x outside its own pairs' 1.38-1.68 (docs/notes/2026-11-27-peer-memory.md).
// A ratio above 1: ours is faster.
void derive_paired_speedup(std::vector<json>& entries, const std::function<std::string(const json&)>& point,
                           const std::string& ours, const std::string& peer, const std::string& rate,
                           const std::string& key);

// "2.08x (1.83-2.22)" from a summary record's key and key + "_range"; "-" without them.
std::string paired_speedup_cell(const json& record, const std::string& key);

}  // namespace dlb::bench
