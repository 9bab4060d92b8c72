// Flat-layout buffers saved in ZeRO shards and read back by flat range
// (flat_shards.hpp): ranges across shard and view boundaries read the values
// written, a missing or foreign shard is refused, whole-model files read the
// same through open_view_tensors, and read_elements checks its range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/checkpoint/flat_shards.hpp"
#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/checkpoint/safetensors_writer.hpp"
#include "meshtrain/core/error.hpp"
#include "meshtrain/core/rng.hpp"
#include "temp_dir.hpp"

namespace meshtrain::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kWorld = 3;

// Units: [wte, wte.b] whole-step, h.0, h.1, [ln_f] whole-step. `variant` 1
// gives h.0.w another shape of the same size, 2 one more view: other layouts.
void declare_store(ParamStore& s, int variant = 0) {
  s.declare("wte", {50, 7}, true);  // 350 -> 352
  s.declare("wte.b", {5}, false);   // 16
  s.begin_unit("h.0");
  s.declare("h.0.w", variant == 1 ? Shape{13, 7} : Shape{7, 13}, true);  // 96
  s.declare("h.0.b", {33}, false);                                      // 48
  s.end_unit();
  s.begin_unit("h.1");
  s.declare("h.1.w", {1001}, true);  // 1008
  s.end_unit();
  s.declare("ln_f", {9}, false);  // 16
  if (variant == 2) s.declare("extra", {4}, false);
  s.allocate();
}

// The unit-by-unit ZeRO split (parallel::ShardLayout, which the checkpoint
// layer cannot link; tests/unit/parallel/zero/shard_layout_test.cpp checks it
// follows this rule): unit u is cut into kWorld slices of the smallest
// multiple of 16 that covers it, rank r owns slice r, and its shard buffers
// hold its slices back to back.
FlatSegments segments_of(const ParamStore& s, int rank, int world) {
  FlatSegments segs;
  size_t local = 0;
  for (const ParamUnit& u : s.units()) {
    const size_t slice = ((u.size() + size_t(world) - 1) / size_t(world) + 15) / 16 * 16;
    const size_t lo = std::min(u.end, u.begin + size_t(rank) * slice), hi = std::min(u.end, lo + slice);
    if (hi > lo) segs.push_back({.begin = lo, .end = hi, .local = local});
    local += slice;
  }
  return segs;
}

// A store with random parameters (padding 0) and an "exp_avg" buffer whose
// every flat element, padding included, is 1000 + its index; saved as
// kWorld shard files, exp_avg from each rank's shard-layout copy.
struct ShardedCheckpoint {
  TempDir dir;
  ParamStore store;
  std::vector<float> exp_avg;                // flat layout
  std::vector<FlatSegments> segments;        // per rank
  std::vector<fs::path> files;               // per rank

  ShardedCheckpoint() {
    declare_store(store);
    Rng rng(99);
    for (const ParamView& v : store.views())
      for (size_t j = 0; j < v.numel; ++j) store.params()[v.offset + j] = rng.normal();
    exp_avg.resize(store.flat_size());
    for (size_t i = 0; i < exp_avg.size(); ++i) exp_avg[i] = 1000.0f + float(i);
    for (int r = 0; r < kWorld; ++r) {
      segments.push_back(segments_of(store, r, kWorld));
      std::vector<float> shard(segments.back().back().local + segments.back().back().size(), -1.0f);
      for (const FlatSegment& s : segments.back())
        std::copy(exp_avg.begin() + long(s.begin), exp_avg.begin() + long(s.end), shard.begin() + long(s.local));
      files.push_back(dir / shard_file_name(r, kWorld));
      Metadata meta;
      if (r == 0) meta["step"] = "7";
      write_flat_shard(files.back(), store, segments.back(),
                       {{"params", store.params().data(), false}, {"exp_avg", shard.data(), true}}, meta);
    }
  }

  // Ranges across shard bounds, view bounds and padding, the whole range,
  // empty ones, and random ones.
  std::vector<std::pair<size_t, size_t>> ranges() const {
    const size_t n = store.flat_size();
    std::vector<std::pair<size_t, size_t>> out = {{0, n}, {0, 0}, {17, 17}, {n, n}, {0, 1}, {n - 1, n}};
    auto clip = [n](long x) { return size_t(std::clamp(x, 0L, long(n))); };
    for (const auto& segs : segments)
      for (const FlatSegment& s : segs) {
        out.emplace_back(clip(long(s.begin) - 5), clip(long(s.begin) + 5));
        out.emplace_back(clip(long(s.end) - 3), clip(long(s.end) + 40));
      }
    for (const ParamView& v : store.views())  // from inside a view over its padding into the next
      out.emplace_back(clip(long(v.offset + v.numel) - 2), clip(long(v.offset + v.numel) + 20));
    Rng rng(5);
    for (int i = 0; i < 40; ++i) {
      size_t a = size_t(rng.below(n + 1)), b = size_t(rng.below(n + 1));
      out.emplace_back(std::min(a, b), std::max(a, b));
    }
    return out;
  }
};

std::string checkpoint_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "no CheckpointError";
}

// out[0, end - begin) == want[begin, end) bitwise; out starts as a sentinel.
void expect_range(const FlatRangeReader& reader, const char* buffer, size_t begin, size_t end,
                  const std::function<float(size_t)>& want) {
  std::vector<float> out(end - begin, -12345.0f);
  reader.read(buffer, begin, end, out.data());
  for (size_t i = begin; i < end; ++i) {
    const float w = want(i);
    ASSERT_EQ(std::memcmp(&out[i - begin], &w, sizeof(float)), 0)
        << buffer << " [" << begin << ", " << end << "): element " << i << " is " << out[i - begin] << ", expected " << w;
  }
}

TEST(FlatShards, ShardFilesHoldOneTensorPerBufferAndSegment) {
  ShardedCheckpoint ck;
  EXPECT_EQ(shard_file_name(1, 4), "shard-00001-of-00004.safetensors");
  for (int r = 0; r < kWorld; ++r) {
    SafetensorsReader reader(ck.files[size_t(r)]);
    std::vector<std::string> want, got;
    for (const char* buffer : {"params", "exp_avg"})
      for (const FlatSegment& s : ck.segments[size_t(r)]) {
        want.push_back(std::string(buffer) + "@" + std::to_string(s.begin));
        const TensorInfo& t = reader.info(want.back());
        EXPECT_EQ(t.dtype, Dtype::F32);
        EXPECT_EQ(t.shape, Shape{int64_t(s.size())}) << want.back();
      }
    for (const TensorInfo& t : reader.tensors()) got.push_back(t.name);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "rank " << r;
  }
  const Metadata meta = read_shard_metadata(ck.files[0]);
  EXPECT_EQ(meta.at("step"), "7");
  EXPECT_EQ(meta.at("flat_size"), std::to_string(ck.store.flat_size()));
  EXPECT_EQ(read_shard_metadata(ck.files[1]).count("step"), 0u);
}

TEST(FlatShards, ReadsAnyFlatRangeAcrossShards) {
  ShardedCheckpoint ck;
  ASSERT_EQ(ck.store.flat_size(), 352u + 16 + 96 + 48 + 1008 + 16);
  ASSERT_GE(ck.segments[1].size(), 3u);
  // Any order of files.
  auto reader = open_flat_shards({ck.files[2], ck.files[0], ck.files[1]}, ck.store);
  EXPECT_TRUE(reader->has("params"));
  EXPECT_TRUE(reader->has("exp_avg"));
  EXPECT_FALSE(reader->has("exp_avg_sq"));
  const auto params = ck.store.params();
  for (const auto& [begin, end] : ck.ranges()) {
    expect_range(*reader, "params", begin, end, [&](size_t i) { return params[i]; });
    expect_range(*reader, "exp_avg", begin, end, [&](size_t i) { return ck.exp_avg[i]; });
    if (HasFatalFailure()) return;
  }
  float out[1];
  EXPECT_NE(checkpoint_error_of([&] { reader->read("exp_avg_sq", 0, 1, out); }), "no CheckpointError");
}

TEST(FlatShards, MissingShardIsAGap) {
  ShardedCheckpoint ck;
  for (int missing = 0; missing < kWorld; ++missing) {
    std::vector<fs::path> files;
    for (int r = 0; r < kWorld; ++r)
      if (r != missing) files.push_back(ck.files[size_t(r)]);
    const std::string error = checkpoint_error_of([&] { open_flat_shards(files, ck.store); });
    const size_t first_missing = ck.segments[size_t(missing)].front().begin;
    EXPECT_NE(error.find("'exp_avg' leave out elements from " + std::to_string(first_missing)), std::string::npos)
        << "without rank " << missing << ": " << error;
    EXPECT_NE(error.find("missing from the checkpoint"), std::string::npos) << error;
  }
  const std::string twice = checkpoint_error_of([&] { open_flat_shards({ck.files[0], ck.files[1], ck.files[1], ck.files[2]}, ck.store); });
  EXPECT_NE(twice.find("overlap at"), std::string::npos) << twice;
  EXPECT_NE(checkpoint_error_of([&] { open_flat_shards({}, ck.store); }), "no CheckpointError");
}

TEST(FlatShards, ShardOfAnotherLayoutIsRefused) {
  ShardedCheckpoint ck;
  for (int variant : {1, 2}) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    ParamStore other;
    declare_store(other, variant);
    if (variant == 1) {
      ASSERT_EQ(other.flat_size(), ck.store.flat_size());  // only the shape differs
    }
    const fs::path path = ck.dir / ("other-" + std::to_string(variant) + ".safetensors");
    write_flat_shard(path, other, segments_of(other, 0, kWorld), {{"params", other.params().data(), false}}, {});
    const std::string error = checkpoint_error_of([&] { open_flat_shards({path, ck.files[1], ck.files[2]}, ck.store); });
    EXPECT_NE(error.find(path.string() + ": written for another model"), std::string::npos) << error;
    // And the other way round: this checkpoint does not load into the other model.
    EXPECT_NE(checkpoint_error_of([&] { open_flat_shards(ck.files, other); }), "no CheckpointError");
  }
  // A whole-model file is no shard file.
  const fs::path model = ck.dir / "model.safetensors";
  save_params(ck.store, model);
  const std::string error = checkpoint_error_of([&] { open_flat_shards({model}, ck.store); });
  EXPECT_NE(error.find("not a meshtrain shard file"), std::string::npos) << error;
}

TEST(FlatShards, ViewTensorFilesReadTheSameRanges) {
  ShardedCheckpoint ck;
  const fs::path model = ck.dir / "model.safetensors", state = ck.dir / "train_state.safetensors";
  save_params(ck.store, model);
  const auto entries = view_tensors(ck.store, ck.exp_avg.data(), "exp_avg.");
  write_safetensors(state, entries);
  auto reader = open_view_tensors({{"params", model, ""}, {"exp_avg", state, "exp_avg."}}, ck.store);
  EXPECT_TRUE(reader->has("exp_avg"));
  EXPECT_FALSE(reader->has("momentum_buffer"));
  std::vector<bool> in_view(ck.store.flat_size(), false);
  for (const ParamView& v : ck.store.views())
    for (size_t j = 0; j < v.numel; ++j) in_view[v.offset + j] = true;
  const auto params = ck.store.params();
  for (const auto& [begin, end] : ck.ranges()) {
    expect_range(*reader, "params", begin, end, [&](size_t i) { return params[i]; });
    // The padding between views is not in the file and reads 0 (the shards above carried it).
    expect_range(*reader, "exp_avg", begin, end, [&](size_t i) { return in_view[i] ? ck.exp_avg[i] : 0.0f; });
    if (HasFatalFailure()) return;
  }
  float out[1];
  EXPECT_NE(checkpoint_error_of([&] { reader->read("momentum_buffer", 0, 1, out); }), "no CheckpointError");
  ParamStore other;
  declare_store(other, 1);
  EXPECT_NE(checkpoint_error_of([&] { open_view_tensors({{"params", model, ""}}, other); }), "no CheckpointError");
}

TEST(SafetensorsReader, ReadElementsChecksTheRange) {
  TempDir dir;
  const std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int32_t> ints = {1, 2, 3};
  const std::vector<TensorEntry> entries = {tensor_entry<float>("x", {2, 5}, x),
                                            tensor_entry<int32_t>("i", {3}, ints)};
  write_safetensors(dir / "t.safetensors", entries);
  SafetensorsReader reader(dir / "t.safetensors");
  std::vector<float> out(3, -1.0f);
  reader.read_elements("x", 7, out);
  EXPECT_EQ(out, (std::vector<float>{7, 8, 9}));
  reader.read_elements("x", 0, std::span<float>(out.data(), 1));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NO_THROW(reader.read_elements("x", 10, {}));  // empty, at the end
  EXPECT_THROW(reader.read_elements("x", 8, out), CheckpointError);                     // [8, 11) of 10
  EXPECT_THROW(reader.read_elements("x", 11, {}), CheckpointError);                     // starts past the end
  EXPECT_THROW(reader.read_elements("x", size_t(-2), out), CheckpointError);            // first + size wraps
  EXPECT_THROW(reader.read_elements("i", 0, std::span<float>(out.data(), 1)), CheckpointError);  // I32
  EXPECT_THROW(reader.read_elements("nope", 0, std::span<float>(out.data(), 1)), CheckpointError);
  const std::string error = checkpoint_error_of([&] { reader.read_elements("x", 8, out); });
  EXPECT_NE(error.find("has 10 elements"), std::string::npos) << error;
}

}  // namespace
}  // namespace meshtrain::checkpoint
