// Suite amp's sequence-model cases as both of its tests make and run them (test_seq_amp.cpp on the
// CPU, test_gpt2_suite_gpu.cu's SeqAmpGpu on a GPU): the quick options at batch 2 with 3 parity
// steps, and one case's life (set up, verified, run once, annotated, torn down) with the checks
// every dtype shares.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/suite.h"

namespace seqamptest {

using dlb::bench::json;

// The amp suite's cases for `model` at batch 2 on `devices` in `dtypes`, 3 parity steps.
inline std::vector<dlb::bench::CaseSpec> cases(const std::vector<std::string>& devices, const std::string& model,
                                               const std::vector<std::string>& dtypes) {
  const dlb::bench::Suite& s = *dlb::bench::find_suite("amp");
  dlb::bench::SuiteOptions o =
      s.options(true, {{"model", {model}}, {"batch", {2}}, {"dtype", dtypes}, {"parity_steps", {3}}, {"size", json::array()}});
  o.devices = devices;
  return s.expand(o);
}

// One train case verified and run once, in tokens/s, its 3 parity steps recorded: its record, with
// its work's items as "work_items".
inline json run(const dlb::bench::CaseSpec& spec) {
  auto c = spec.make();
  c->setup();
  const auto v = c->verify();
  EXPECT_TRUE(v.ok) << v.message;
  c->run();
  EXPECT_EQ(c->metric(), dlb::bench::Metric::tokens_per_s);
  json e;
  c->annotate(e);
  EXPECT_EQ(e.at("parity_steps"), 3);
  e["work_items"] = c->work().items;
  c->teardown();
  return e;
}

}  // namespace seqamptest
