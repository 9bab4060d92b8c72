#pragma once
// Arithmetic shared by the CPU kernels and the CUDA kernels.
//
// A function marked MESHTRAIN_HD is compiled for the host by g++ and, inside
// a .cu translation unit, for the device by nvcc as well. The CPU kernels
// call these functions in their loops, the CUDA kernels in theirs, so both
// compute the same expressions; the CPU tests check them against the CPU
// kernels bit for bit, which is all the testing a GPU-less machine can do.
//
// Same expressions give the same bits only where both compilers round the
// same: g++ builds with -ffp-contract=off (no FMA contraction, which g++
// does by default even under -std=c++20; the top CMakeLists.txt says why)
// and IEEE division and sqrt, and the CUDA kernels that use these functions
// build with --fmad=false and nvcc's default IEEE division and sqrt
// (kernels/cuda/).
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MESHTRAIN_HD __host__ __device__ __forceinline__
#else
#define MESHTRAIN_HD inline
#endif

namespace meshtrain {

// std::bit_cast, callable from device code too (memcpy of a scalar compiles
// to a register move on both sides).
template <class To, class From>
MESHTRAIN_HD To bit_cast_hd(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast_hd: sizes differ");
  To to;
  memcpy(&to, &from, sizeof to);
  return to;
}

}  // namespace meshtrain
