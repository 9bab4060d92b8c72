// GradientSync with threads as ranks over the in-process transport: the
// average arrives on every rank bit-identically, buckets start while
// announcements come in, and unannounced tensors are still
// reduced at the end.
#include <gtest/gtest.h>

#include <cstring>

#include "meshtrain/comm/group/process_group.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/parallel/data_parallel/gradient_sync.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

ParamStore make_store() {
  ParamStore s;
  for (int i = 0; i < 6; ++i) s.declare("t" + std::to_string(i), {int64_t(1000 + 37 * i)}, true);
  s.allocate();
  return s;
}

float grad_value(int rank, size_t i) { return float(rank + 1) * 0.25f + float(i % 13) * 0.125f; }

// Runs `ranks` threads; each fills its gradients, announces the tensors
// listed in `announce` in order, and finishes.
std::vector<ParamStore> run(int ranks, std::vector<size_t> announce, size_t bucket_bytes) {
  std::vector<ParamStore> stores;
  for (int r = 0; r < ranks; ++r) stores.push_back(make_store());
  testing::on_inproc_ranks(ranks, [&](int r, comm::ProcessGroup& group) {
    ParamStore& store = stores[size_t(r)];
    for (size_t i = 0; i < store.params().size(); ++i) store.params()[i] = float(r);  // differ before broadcast
    GradientSync sync(store, group, {.bucket_bytes = bucket_bytes, .first_bucket_bytes = bucket_bytes});
    sync.broadcast_parameters();
    sync.start_backward();
    auto grads = store.grads();
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = grad_value(r, i);
    for (size_t v : announce) store.grad_ready(v);
    GradientSyncStats stats = sync.finish_backward();
    EXPECT_EQ(stats.bytes, ranks > 1 ? grads.size_bytes() : 0u);  // one rank sends nothing
  });
  return stores;
}

TEST(GradientSync, AveragesOnEveryRankBitIdentically) {
  for (int ranks : {1, 2, 3, 4}) {
    // Announce in backward order (last tensor first), a few per bucket.
    auto stores = run(ranks, {5, 4, 3, 2, 1, 0}, 8000);
    for (size_t i = 0; i < stores[0].grads().size(); i += 7) {
      float sum = 0;
      for (int r = 0; r < ranks; ++r) sum += grad_value(r, i);
      ASSERT_NEAR(stores[0].grads()[i], sum / float(ranks), 1e-6f) << ranks << " ranks, element " << i;
    }
    for (int r = 1; r < ranks; ++r) {
      EXPECT_EQ(0, std::memcmp(stores[0].grads().data(), stores[size_t(r)].grads().data(),
                               stores[0].grads().size_bytes()));
      EXPECT_EQ(stores[size_t(r)].params()[0], 0.0f) << "parameters come from rank 0";
    }
  }
}

TEST(GradientSync, UnannouncedTensorsAreReducedAtTheEnd) {
  // Only some tensors announced, others never: all are averaged anyway.
  auto stores = run(2, {5, 2}, 4000);
  for (size_t i = 0; i < stores[0].grads().size(); i += 11)
    ASSERT_NEAR(stores[1].grads()[i], (grad_value(0, i) + grad_value(1, i)) / 2, 1e-6f);
}

TEST(GradientSync, AnnouncementsOutsideBackwardAreIgnored) {
  auto transports = comm::make_inproc_transports(1);
  auto comm = std::make_shared<comm::Communicator>(std::move(transports[0]));
  comm::ProcessGroup group(comm);
  ParamStore store = make_store();
  GradientSync sync(store, group, {});
  store.grad_ready(0);  // evaluation's forward/backward-free path: nothing happens
  EXPECT_THROW(sync.finish_backward(), Error);
  sync.start_backward();
  EXPECT_NO_THROW(sync.finish_backward());
}

}  // namespace
}  // namespace meshtrain::parallel
