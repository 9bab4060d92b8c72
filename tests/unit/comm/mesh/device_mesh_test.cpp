// The device mesh: shapes, -1 for "the rest", ep inside dp, error messages
// that name every factor, coordinates, and the groups cut from it.
#include "meshtrain/comm/mesh/device_mesh.hpp"

#include <gtest/gtest.h>

#include "meshtrain/comm/mesh/mesh_groups.hpp"
#include "meshtrain/comm/transport/inproc/inproc_transport.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

std::string error_of(MeshShape shape, int world) {
  try {
    DeviceMesh mesh(shape, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceMeshTest, ProductMustEqualTheWorkers) {
  const std::string e = error_of({.dp = 2, .tp = 3, .pp = 1, .ep = 1}, 8);
  EXPECT_NE(e.find("pp=1 x dp=2 (ep=1) x tp=3: pp x dp x tp = 6 does not equal the 8 workers"), std::string::npos) << e;
  EXPECT_NE(error_of({.dp = 0}, 1).find("dp=0 must be at least 1"), std::string::npos);
  EXPECT_NE(error_of({.dp = -1, .tp = -1}, 4).find("only one of pp, dp, tp may be -1"), std::string::npos);
  const std::string rest = error_of({.dp = -1, .tp = 3}, 8);
  EXPECT_NE(rest.find("8 workers are not divisible by the other axes' product 3"), std::string::npos) << rest;
}

TEST(DeviceMeshTest, ExpertWaysAreCarvedOutOfTheDataWays) {
  const std::string e = error_of({.dp = 4, .ep = 3}, 4);
  EXPECT_NE(e.find("ep=3 does not divide dp=4"), std::string::npos) << e;
  EXPECT_NE(error_of({.dp = 2, .ep = 0}, 2).find("ep=0 must be at least 1"), std::string::npos);
  EXPECT_EQ(error_of({.dp = 4, .tp = 2, .ep = 2}, 8), "");  // ep is not a factor of the worker count
}

TEST(DeviceMeshTest, MinusOneTakesTheRest) {
  const DeviceMesh mesh({.dp = -1, .tp = 2, .pp = 2}, 16);
  EXPECT_EQ(mesh.size(MeshAxis::Data), 4);
  EXPECT_EQ(mesh.describe(), "pp=2 x dp=4 (ep=1) x tp=2 (16 workers)");
  EXPECT_EQ(DeviceMesh({}, 1).size(MeshAxis::Tensor), 1);
  EXPECT_EQ(mesh.shape().workers(), 16);
}

TEST(DeviceMeshTest, TensorAxisVariesFastestThenDataThenPipeline) {
  const DeviceMesh mesh({.dp = 4, .tp = 2, .pp = 2, .ep = 2}, 16);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(mesh.rank_of(mesh.coord(r)), r);
  EXPECT_EQ(mesh.coord(1), (MeshCoord{.dp = 0, .tp = 1, .pp = 0, .ep = 0}));
  EXPECT_EQ(mesh.coord(2), (MeshCoord{.dp = 1, .tp = 0, .pp = 0, .ep = 1}));
  EXPECT_EQ(mesh.coord(4), (MeshCoord{.dp = 2, .tp = 0, .pp = 0, .ep = 0}));
  EXPECT_EQ(mesh.coord(8), (MeshCoord{.dp = 0, .tp = 0, .pp = 1, .ep = 0}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Tensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Data, 5), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Pipeline, 5), (std::vector<int>{5, 13}));
  // Rank 5 is data rank 2: its expert group is data ranks 2-3, and data
  // ranks 0 and 2 hold the same experts.
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Expert, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(mesh.expert_data_ranks(5), (std::vector<int>{1, 5}));
  EXPECT_EQ(DeviceMesh({.dp = 4}, 4).expert_data_ranks(2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_THROW(mesh.coord(16), ConfigError);
  EXPECT_THROW(mesh.rank_of({.dp = 1, .ep = 0}), ConfigError);  // data rank 1 is expert coordinate 1
}

TEST(DeviceMeshTest, GroupsFromOneCallReduceAlongTheirAxis) {
  const DeviceMesh mesh({.dp = 2, .tp = 2, .pp = 2, .ep = 2}, 8);
  std::vector<std::shared_ptr<Communicator>> comms;
  for (auto& t : make_inproc_transports(8)) comms.push_back(std::make_shared<Communicator>(std::move(t)));
  std::vector<MeshGroups> groups;
  for (auto& c : comms) groups.push_back(mesh_groups(mesh, c));
  for (MeshAxis axis : kMeshAxes) {
    SCOPED_TRACE(mesh_axis_name(axis));
    std::vector<std::vector<int64_t>> x(8);
    std::vector<WorkHandle> works;
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(groups[size_t(r)][axis].rank(), mesh.coord(r)[axis]);
      x[size_t(r)].assign(3, r);
      works.push_back(groups[size_t(r)][axis].all_reduce_async(x[size_t(r)]));
    }
    for (auto& w : works) w->wait();
    for (int r = 0; r < 8; ++r) {
      int64_t want = 0;
      for (int member : mesh.group_ranks(axis, r)) want += member;
      EXPECT_EQ(x[size_t(r)][2], want) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace meshtrain::comm
