// The parallel context cut from a device mesh (parallel_context.hpp), with
// threads as ranks over the in-process transport: each axis's group holds
// the ranks DeviceMesh says, in coordinate order, on that axis's channel;
// the expert-data and embedding groups beside them; the sums along each
// axis add exactly their group's values; and the all-worker operations
// span every worker.
#include "meshtrain/parallel/parallel_context.hpp"

#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <vector>

#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"
#include "thread_ranks.hpp"

namespace meshtrain::parallel {
namespace {

using comm::MeshAxis;

std::vector<std::shared_ptr<comm::Communicator>> communicators(int n) {
  std::vector<std::shared_ptr<comm::Communicator>> c;
  for (auto& t : comm::make_inproc_transports(n)) c.push_back(std::make_shared<comm::Communicator>(std::move(t)));
  return c;
}

// One context per rank of `shape`, each built on its own thread (the
// agreement check is a collective over every worker). `own_channels`: the
// tensor, pipeline and expert axes on channels of their own, as a launched
// job has them; else every axis on the main one (as under MPI).
struct Job {
  comm::DeviceMesh mesh;
  std::vector<comm::MeshChannels> channels;
  std::vector<std::unique_ptr<ParallelContext>> ranks;
  std::vector<int> agreed;  // workers each rank's agreement check saw
};

using testing::on_every_rank;

Job make_job(comm::MeshShape shape, bool own_channels) {
  const int n = shape.workers();
  Job job{.mesh = comm::DeviceMesh(shape, n), .channels = {}, .ranks = {}, .agreed = std::vector<int>(size_t(n))};
  job.channels.resize(size_t(n));
  auto main = communicators(n);
  for (int r = 0; r < n; ++r) job.channels[size_t(r)].main = main[size_t(r)];
  if (own_channels)
    for (MeshAxis axis : {MeshAxis::Tensor, MeshAxis::Pipeline, MeshAxis::Expert}) {
      auto own = communicators(n);
      for (int r = 0; r < n; ++r) job.channels[size_t(r)].own[size_t(axis)] = own[size_t(r)];
    }
  job.ranks.resize(size_t(n));
  const ContextSettings settings{.data_parallel = true, .data = "allreduce", .tensor = shape.tp,
                                 .pipeline = shape.pp, .expert = shape.ep};
  on_every_rank(n, [&](int r) {
    job.ranks[size_t(r)] = std::make_unique<ParallelContext>(
        settings, job.mesh, job.channels[size_t(r)],
        [&job, r](comm::ProcessGroup& all) { job.agreed[size_t(r)] = all.size(); });
  });
  return job;
}

TEST(ParallelContextTest, EachAxisGroupHoldsItsMeshRanksOnItsChannel) {
  const comm::MeshShape shape{.dp = 2, .tp = 2, .pp = 2, .ep = 2};
  Job job = make_job(shape, true);
  const comm::DeviceMesh& mesh = job.mesh;
  for (int r = 0; r < 8; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ParallelContext& ctx = *job.ranks[size_t(r)];
    const comm::MeshCoord at = mesh.coord(r);
    EXPECT_EQ(job.agreed[size_t(r)], 8);
    EXPECT_EQ(ctx.worker_rank(), r);
    EXPECT_EQ(ctx.workers(), 8);
    EXPECT_EQ(ctx.data_rank(), at.dp);
    EXPECT_EQ(ctx.data_size(), 2);
    EXPECT_EQ(ctx.tensor_rank(), at.tp);
    EXPECT_EQ(ctx.pipeline_rank(), at.pp);
    EXPECT_EQ(ctx.expert_rank(), at.ep);
    EXPECT_EQ(ctx.expert_data_size(), 1);
    for (MeshAxis axis : comm::kMeshAxes) {
      SCOPED_TRACE(comm::mesh_axis_name(axis));
      const comm::ProcessGroup& g = ctx.groups()[axis];
      const std::vector<int> want = mesh.group_ranks(axis, r);
      EXPECT_EQ(std::vector<int>(g.members().begin(), g.members().end()), want);
      EXPECT_EQ(g.rank(), at[axis]);
      // The data axis runs on the main channel; the others on their own.
      EXPECT_EQ(&g.communicator(), job.channels[size_t(r)][axis].get());
      EXPECT_EQ(&g.communicator() == job.channels[size_t(r)].main.get(), axis == MeshAxis::Data);
    }
    const comm::ProcessGroup& all = *ctx.groups().all;
    EXPECT_EQ(all.size(), 8);
    EXPECT_EQ(all.rank(), r);
    const comm::ProcessGroup& expert_data = *ctx.groups().expert_data;
    EXPECT_EQ(std::vector<int>(expert_data.members().begin(), expert_data.members().end()),
              mesh.expert_data_ranks(r));
    EXPECT_EQ(ctx.expert_data_group(), nullptr);  // one data rank holds each expert set
    // Two stages: every rank is its pipeline's first or last, so every rank
    // is in the embedding pair.
    ASSERT_NE(ctx.embedding_group(), nullptr);
    const std::vector<int> stages = mesh.group_ranks(MeshAxis::Pipeline, r);
    EXPECT_EQ(std::vector<int>(ctx.embedding_group()->members().begin(), ctx.embedding_group()->members().end()),
              (std::vector<int>{stages.front(), stages.back()}));
    ASSERT_NE(ctx.tensor_group(), nullptr);
    EXPECT_EQ(ctx.tensor_group()->rank(), at.tp);
    EXPECT_EQ(ctx.tensor_group()->size(), 2);
    ASSERT_NE(ctx.data_group(), nullptr);
    EXPECT_EQ(ctx.data_group(), &ctx.groups()[MeshAxis::Data]);
    ASSERT_NE(ctx.pipeline_group(), nullptr);
    ASSERT_NE(ctx.expert_group(), nullptr);
  }
}

TEST(ParallelContextTest, SumsAddOverTheirAxisAndTheLeadSpeaksToAll) {
  const comm::MeshShape shape{.dp = 2, .tp = 2, .pp = 2, .ep = 2};
  Job job = make_job(shape, true);
  const comm::DeviceMesh& mesh = job.mesh;
  struct Got {
    double data = 0, tensor = 0, pipeline = 0, expert = 0;
    int64_t lead = 0, max = 0;
    std::vector<std::vector<double>> gathered;
  };
  std::vector<Got> got(8);
  on_every_rank(8, [&](int r) {
    ParallelContext& ctx = *job.ranks[size_t(r)];
    Got& g = got[size_t(r)];
    g.data = g.tensor = g.pipeline = g.expert = double(1 << r);  // a bit per rank: a sum names its members
    ctx.data_sum({&g.data, 1});
    ctx.tensor_sum({&g.tensor, 1});
    ctx.pipeline_sum({&g.pipeline, 1});
    ctx.expert_sum({&g.expert, 1});
    g.lead = ctx.broadcast_from_lead(100 + r);
    g.max = ctx.max_over_workers(r * 3);
    const std::vector<double> mine(size_t(r % 3), double(r));  // lengths 0, 1, 2
    g.gathered = ctx.all_gather_workers(mine);
  });
  const auto bits = [](const std::vector<int>& ranks) {
    double sum = 0;
    for (int q : ranks) sum += double(1 << q);
    return sum;
  };
  for (int r = 0; r < 8; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const Got& g = got[size_t(r)];
    EXPECT_EQ(g.data, bits(mesh.group_ranks(MeshAxis::Data, r)));
    EXPECT_EQ(g.tensor, bits(mesh.group_ranks(MeshAxis::Tensor, r)));
    EXPECT_EQ(g.pipeline, bits(mesh.group_ranks(MeshAxis::Pipeline, r)));
    EXPECT_EQ(g.expert, bits(mesh.group_ranks(MeshAxis::Expert, r)));
    EXPECT_EQ(g.lead, 100);
    EXPECT_EQ(g.max, 21);
    ASSERT_EQ(g.gathered.size(), 8u);
    for (int q = 0; q < 8; ++q) EXPECT_EQ(g.gathered[size_t(q)], std::vector<double>(size_t(q % 3), double(q)));
  }
}

// tp2 x dp2 on one channel: every worker counts in workers(), the data axis
// only in data_size(); axes of one way have no group.
TEST(ParallelContextTest, WorkersCountEveryoneAndSingleWayAxesHaveNoGroup) {
  Job job = make_job({.dp = 2, .tp = 2}, false);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ParallelContext& ctx = *job.ranks[size_t(r)];
    EXPECT_EQ(ctx.workers(), 4);
    EXPECT_EQ(ctx.data_size(), 2);
    EXPECT_EQ(ctx.tensor_size(), 2);
    EXPECT_EQ(ctx.data_rank(), r / 2);
    EXPECT_EQ(ctx.tensor_rank(), r % 2);
    EXPECT_EQ(&ctx.groups()[MeshAxis::Tensor].communicator(), job.channels[size_t(r)].main.get());
    EXPECT_EQ(ctx.pipeline_group(), nullptr);
    EXPECT_EQ(ctx.embedding_group(), nullptr);
    EXPECT_EQ(ctx.expert_group(), nullptr);
    EXPECT_EQ(ctx.groups().find(MeshAxis::Expert), nullptr);
    EXPECT_THROW(ctx.groups()[MeshAxis::Pipeline], CommError);
  }
  // tp2 alone: the data group is cut (one member) but there is nothing to
  // reduce over.
  Job tensor_only = make_job({.tp = 2}, true);
  for (auto& ctx : tensor_only.ranks) {
    EXPECT_EQ(ctx->data_group(), nullptr);
    ASSERT_NE(ctx->groups().find(MeshAxis::Data), nullptr);
    EXPECT_EQ(ctx->groups()[MeshAxis::Data].size(), 1);
    double x = 5;
    ctx->data_sum({&x, 1});
    EXPECT_EQ(x, 5);
  }
}

}  // namespace
}  // namespace meshtrain::parallel
