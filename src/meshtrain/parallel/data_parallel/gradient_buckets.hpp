#pragma once
// Gradient buckets for the overlapped all-reduce: runs of consecutive tensors
// of the flat gradient buffer, taken from the LAST declared tensor backwards,
// the order in which backward finishes them. Each bucket is one range of the
// flat buffer (padding between tensors included), so its all-reduce needs no
// copy. Every rank computes the same plan from the same model.
#include <cstddef>
#include <vector>

#include "meshtrain/core/param_store.hpp"

namespace meshtrain::parallel {

struct GradientBucket {
  size_t begin = 0, end = 0;             // elements [begin, end) of the flat buffer
  size_t first_view = 0, end_view = 0;   // tensors [first_view, end_view) of the store
  bool expert = false;                   // expert tensors only (ParamView::expert); otherwise none
  size_t elements() const { return end - begin; }
};

// Bucket 0 holds the last tensors. A bucket closes once it holds at least
// bucket_bytes, except the first, which closes at first_bucket_bytes (as in
// PyTorch DDP) so communication starts early in backward, and the last: the
// first tensors up to first_bucket_bytes, ready only at the end of backward,
// go alone so little is left to send after it. A tensor larger than a bucket
// gets a bucket of its own. Expert and dense tensors never share a bucket
// (expert gradients are reduced over other ranks). An empty store has no
// bucket.
std::vector<GradientBucket> plan_gradient_buckets(const ParamStore& store, size_t bucket_bytes,
                                                  size_t first_bucket_bytes);

}  // namespace meshtrain::parallel
