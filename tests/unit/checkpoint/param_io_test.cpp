// ParamStore <-> safetensors: round trips and refusal of a mismatched model.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/core/error.hpp"
#include "temp_dir.hpp"

namespace meshtrain::checkpoint {
namespace {

using testing::TempDir;

struct Decl {
  std::string name;
  Shape shape;
};

void declare_all(ParamStore& store, const std::vector<Decl>& decls) {
  for (const auto& d : decls) store.declare(d.name, d.shape, d.shape.size() > 1);
  store.allocate();
}

const std::vector<Decl> kModel = {{"wte.weight", {5, 4}}, {"h.0.mlp.c_fc.weight", {4, 8}},
                                  {"h.0.mlp.c_fc.bias", {8}}, {"ln_f.weight", {4}}};

void fill(ParamStore& store, float base) {
  auto p = store.params();
  for (size_t i = 0; i < p.size(); ++i) p[i] = base + static_cast<float>(i) * 0.25f;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no CheckpointError)";
}

TEST(ParamIo, RoundTripEveryView) {
  TempDir tmp;
  ParamStore saved, loaded;
  declare_all(saved, kModel);
  declare_all(loaded, kModel);
  fill(saved, 1.0f);
  save_params(saved, tmp / "model.safetensors", {{"step", "7"}});

  SafetensorsReader reader(tmp / "model.safetensors");
  ASSERT_EQ(reader.tensors().size(), kModel.size());
  for (const auto& d : kModel) {
    ASSERT_NE(reader.find(d.name), nullptr) << d.name;
    EXPECT_EQ(reader.find(d.name)->dtype, Dtype::F32);
    EXPECT_EQ(reader.find(d.name)->shape, d.shape);
  }
  EXPECT_EQ(reader.metadata().at("step"), "7");

  load_params(loaded, tmp / "model.safetensors");
  for (size_t v = 0; v < saved.views().size(); ++v)
    for (size_t i = 0; i < saved.view(v).numel; ++i)
      ASSERT_EQ(loaded.param(v)[i], saved.param(v)[i]) << saved.view(v).name << "[" << i << "]";
}

TEST(ParamIo, MissingExtraAndMisshapenTensorsAreListed) {
  TempDir tmp;
  ParamStore saved;
  declare_all(saved, {{"wte.weight", {5, 4}}, {"h.0.mlp.c_fc.weight", {4, 9}}, {"old.bias", {3}}, {"ln_f.weight", {4}}});
  save_params(saved, tmp / "other.safetensors");

  ParamStore model;
  declare_all(model, kModel);
  fill(model, 3.0f);
  const std::vector<float> before(model.params().begin(), model.params().end());
  const std::string msg = error_of([&] { load_params(model, tmp / "other.safetensors"); });
  EXPECT_NE(msg.find("other.safetensors does not match the model (3 differences)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing tensor 'h.0.mlp.c_fc.bias' (8)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("extra tensor 'old.bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model has F32 (4, 8), file has F32 (4, 9)"), std::string::npos) << msg;
  // Refused before any byte of the model changed.
  EXPECT_TRUE(std::equal(before.begin(), before.end(), model.params().begin()));
}

TEST(ParamIo, LongListsAreCut) {
  TempDir tmp;
  ParamStore saved;
  std::vector<Decl> many;
  for (int i = 0; i < 12; ++i) many.push_back({std::string("t").append(std::to_string(i)), {2}});
  declare_all(saved, many);
  save_params(saved, tmp / "many.safetensors");
  ParamStore model;
  declare_all(model, kModel);
  const std::string msg = error_of([&] { load_params(model, tmp / "many.safetensors"); });
  EXPECT_NE(msg.find("(16 differences)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("... and 11 more"), std::string::npos) << msg;
}

TEST(ParamIo, WrongDtypeIsADifference) {
  TempDir tmp;
  const std::vector<double> d(4);
  std::vector<TensorEntry> entries = {tensor_entry<double>("ln_f.weight", {4}, d)};
  write_safetensors(tmp / "d.safetensors", entries);
  ParamStore model;
  declare_all(model, {{"ln_f.weight", {4}}});
  const std::string msg = error_of([&] { load_params(model, tmp / "d.safetensors"); });
  EXPECT_NE(msg.find("file has F64 (4)"), std::string::npos) << msg;
}

TEST(ParamIo, PrefixedBuffersShareOneFile) {
  // A train-state file: two optimizer buffers in the store's layout.
  TempDir tmp;
  ParamStore store;
  declare_all(store, kModel);
  std::vector<float> exp_avg(store.flat_size()), exp_avg_sq(store.flat_size());
  for (size_t i = 0; i < exp_avg.size(); ++i) {
    exp_avg[i] = static_cast<float>(i);
    exp_avg_sq[i] = static_cast<float>(i) * 2;
  }
  auto entries = view_tensors(store, exp_avg.data(), "exp_avg.");
  auto sq = view_tensors(store, exp_avg_sq.data(), "exp_avg_sq.");
  entries.insert(entries.end(), sq.begin(), sq.end());
  write_safetensors(tmp / "train_state.safetensors", entries, {{"optimizer", "adamw"}});

  SafetensorsReader reader(tmp / "train_state.safetensors");
  std::vector<float> a(store.flat_size()), b(store.flat_size());
  read_view_tensors(reader, store, a.data(), "exp_avg.");
  read_view_tensors(reader, store, b.data(), "exp_avg_sq.");
  for (const ParamView& v : store.views())
    for (size_t i = 0; i < v.numel; ++i) {
      ASSERT_EQ(a[v.offset + i], exp_avg[v.offset + i]);
      ASSERT_EQ(b[v.offset + i], exp_avg_sq[v.offset + i]);
    }
  // Without a prefix every tensor counts, so a plain parameter load refuses it.
  EXPECT_THROW(read_view_tensors(reader, store, a.data()), CheckpointError);
}

TEST(ParamIo, UnallocatedStoreIsRefused) {
  TempDir tmp;
  ParamStore store;
  store.declare("w", {2}, true);
  EXPECT_THROW(save_params(store, tmp / "x.safetensors"), CheckpointError);
}

}  // namespace
}  // namespace meshtrain::checkpoint
