// Reduce-on-receive: the receiver combines each chunk straight out of the
// slot (or, single-copy, out of its bounce buffer) into its own buffer.
// Element counts span several slots and bounce pieces and end mid-slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "shm_test_util.hpp"

namespace meshtrain::comm {
namespace {

using namespace shm_test;

template <class T>
T value(int rank, size_t i) {
  return T(int64_t(i % 1000) * (rank == 0 ? 3 : -2) + rank * 7);
}

// Rank 0 sends n elements; rank 1 reduces them into its own; returns
// whether rank 1's result equals the serial reduction.
template <class T>
bool reduce_case(const std::string& job, int rank, Reduction red, size_t n,
                 size_t single_copy_bytes = ShmOptions{}.single_copy_bytes) {
  ShmOptions o = options(job, rank, 2);
  o.single_copy_bytes = o.single_copy_bytes_shared_cores = single_copy_bytes;
  o.slot_bytes = 8192;
  o.slot_count = 3;
  auto t = connect_shm(o);
  std::vector<T> mine(n);  // (n) elements
  for (size_t i = 0; i < n; ++i) mine[i] = value<T>(rank, i);
  if (rank == 0) {
    t->send(1, mine.data(), n * sizeof(T));
    return true;
  }
  RecvOp op{0, mine.data(), n * sizeof(T), &red};
  t->exchange({}, {&op, 1});
  for (size_t i = 0; i < n; ++i) {
    const T a = value<T>(1, i), b = value<T>(0, i);
    const T want = red.op == ReduceOp::Sum ? T(a + b) : std::max(a, b);
    if (mine[i] != want) return false;
  }
  return true;
}

template <class T>
void check_all(DataType dtype) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    for (size_t n : {size_t(0), size_t(1), size_t(100003)}) {
      for (size_t single_copy : {size_t(0), size_t(4096)}) {  // slots, then (n large) single-copy
        const std::string job = unique_job_id("reduce");
        std::vector<int> ok(2, 0);
        auto errors = run_threads(2, [&](int r) { ok[r] = reduce_case<T>(job, r, {dtype, op}, n, single_copy); });
        EXPECT_EQ(errors, std::vector<std::string>(2));
        EXPECT_EQ(ok, std::vector<int>({1, 1}))
            << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n << " single_copy=" << single_copy;
      }
    }
  }
}

TEST(ShmReduce, F32) { check_all<float>(DataType::F32); }
TEST(ShmReduce, F64) { check_all<double>(DataType::F64); }
TEST(ShmReduce, I32) { check_all<int32_t>(DataType::I32); }
TEST(ShmReduce, I64) { check_all<int64_t>(DataType::I64); }

TEST(ShmReduce, AcrossProcesses) {
  const std::string job = unique_job_id("reduce-p");
  auto codes = run_processes(2, [&](int r) {
    return reduce_case<float>(job, r, {DataType::F32, ReduceOp::Sum}, (1u << 20) + 1);
  });
  EXPECT_EQ(codes, std::vector<int>({0, 0}));
}

TEST(ShmReduce, PartialElementRejected) {
  const std::string job = unique_job_id("reduce-odd");
  auto errors = run_threads(2, [&](int r) {
    auto t = connect_shm(options(job, r, 2, 2000));
    if (r == 1) {
      Reduction red{DataType::F32, ReduceOp::Sum};
      char buf[6] = {};
      RecvOp op{0, buf, sizeof(buf), &red};
      t->exchange({}, {&op, 1});
    }
  });
  EXPECT_NE(errors[1].find("not a whole number of f32 elements"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace meshtrain::comm
