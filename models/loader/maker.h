// A worker's job: batch b of epoch e made into a slot. The epoch's order (sampler.h) gives the
// sample indices; each sample is read/decoded (source.h) and transformed (transform.h) straight into
// its place in the batch, so collating is only the labels and indices beside it. One maker per
// worker (its own read/decode buffers and cached order).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/loader/slots.h"
#include "models/loader/source.h"
#include "models/loader/transform.h"

namespace dlb::models::loader {

struct MakerConfig {
  std::size_t batch = 64;
  bool shuffle = true;
  std::uint64_t seed = 0;
  TransformSpec transform;
};

class BatchMaker {
 public:
  BatchMaker(const Source& src, const MakerConfig& cfg);
  // Fills `out` with batch b of epoch e; throws what the source throws (InputError for a bad file).
  void make(std::int64_t epoch, std::int64_t b, const SlotView& out);
  // Batch b of epoch e's sample indices, in order.
  const std::uint32_t* indices(std::int64_t epoch, std::int64_t b, int* n);

 private:
  const std::vector<std::uint32_t>& order(std::int64_t epoch);
  const Source& src_;
  MakerConfig cfg_;
  Transform tf_;
  SampleScratch scratch_;
  std::int64_t order_epoch_ = -1;
  std::vector<std::uint32_t> order_;
};

// The reference batch: the same indices through the source and transform_reference, one sample at
// a time, in a plain loop (the tests compare the loader's batches with it).
void reference_batch(const Source& src, const MakerConfig& cfg, std::int64_t epoch, std::int64_t b,
                     std::vector<float>* x, std::vector<std::int32_t>* y, std::vector<std::uint32_t>* idx);

}  // namespace dlb::models::loader
