// The device mesh: shapes, -1 for "the rest", error messages that name every
// factor, coordinates, and the groups cut from it.
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

TEST(DeviceMeshTest, ProductMustEqualTheWorldSize) {
  const std::string e = error_of({.dp = 2, .tp = 3, .pp = 1, .ep = 1}, 8);
  EXPECT_NE(e.find("dp=2 x tp=3 x pp=1 x ep=1 = 6 ranks does not equal the world size 8"), std::string::npos) << e;
  EXPECT_NE(error_of({.dp = 0}, 1).find("dp=0 must be at least 1"), std::string::npos);
  EXPECT_NE(error_of({.dp = -1, .tp = -1}, 4).find("only one axis may be -1"), std::string::npos);
  const std::string rest = error_of({.dp = -1, .tp = 3}, 8);
  EXPECT_NE(rest.find("world size 8 is not divisible by the other axes' product 3"), std::string::npos) << rest;
}

TEST(DeviceMeshTest, MinusOneTakesTheRest) {
  const DeviceMesh mesh({.dp = -1, .tp = 2, .pp = 2}, 16);
  EXPECT_EQ(mesh.size(MeshAxis::Data), 4);
  EXPECT_EQ(mesh.describe(), "dp=4 x tp=2 x pp=2 x ep=1 (16 ranks)");
  EXPECT_EQ(DeviceMesh({}, 1).size(MeshAxis::Tensor), 1);
}

TEST(DeviceMeshTest, TensorAxisVariesFastestThenExpertDataPipeline) {
  const DeviceMesh mesh({.dp = 2, .tp = 2, .pp = 2, .ep = 3}, 24);
  for (int r = 0; r < 24; ++r) EXPECT_EQ(mesh.rank_of(mesh.coord(r)), r);
  EXPECT_EQ(mesh.coord(1), (MeshCoord{.dp = 0, .tp = 1, .pp = 0, .ep = 0}));
  EXPECT_EQ(mesh.coord(2), (MeshCoord{.dp = 0, .tp = 0, .pp = 0, .ep = 1}));
  EXPECT_EQ(mesh.coord(6), (MeshCoord{.dp = 1, .tp = 0, .pp = 0, .ep = 0}));
  EXPECT_EQ(mesh.coord(12), (MeshCoord{.dp = 0, .tp = 0, .pp = 1, .ep = 0}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Tensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Expert, 5), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Data, 5), (std::vector<int>{5, 11}));
  EXPECT_EQ(mesh.group_ranks(MeshAxis::Pipeline, 5), (std::vector<int>{5, 17}));
  EXPECT_THROW(mesh.coord(24), ConfigError);
}

TEST(DeviceMeshTest, GroupsFromOneCallReduceAlongTheirAxis) {
  const DeviceMesh mesh({.dp = 2, .tp = 2, .pp = 2}, 8);
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
