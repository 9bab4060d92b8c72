#pragma once
// The matrix products of a linear layer on the GPU, through cuBLASLt, for
// row-major tensors. One shape names all three forms:
//
//   M  rows (B*T)       K  input features       N  output features
//   inp (M, K)          out (M, N)              weight W, in one of two layouts:
//
//   WeightLayout::InOut  W (K, N) = (in, out): Hugging Face GPT-2's Conv1D, how
//                        meshtrain's nn::Linear stores its weights (the default)
//   WeightLayout::OutIn  W (N, K) = (out, in): torch's nn.Linear; in meshtrain
//                        the tied classifier's wte (V, C)
//
//                    InOut                          OutIn
//   forward          out = inp @ W                  out = inp @ W^T         [+ bias (N)] [GELU]
//   backward_input   dinp = dout @ W^T              dinp = dout @ W         [* gelu'(pre)]
//   backward_weight  dW (K, N) = inp^T @ dout       dW (N, K) = dout^T @ inp
//                                                   [dbias (N) = column sums of dout]
//
// The weight and its gradient are read and written as stored: no transposed
// copy is made in either layout.
//
// Operands are fp32 or bf16 (both of one product the same type), the sums
// run in fp32 (CUBLAS_COMPUTE_32F: fp32 operands stay IEEE fp32, never TF32),
// the output is fp32 or, for bf16 operands, bf16. A bias, a bias gradient
// and the GELU's saved pre-activation have the output's type. Every pointer
// must be 16-byte aligned (cudaMalloc'd buffers and the usual sub-buffer
// offsets are).
//
// A product's cuBLASLt descriptors and algorithm are made on its first call
// and kept (CublasLtContext): the same shape, layout, types, form and
// epilogue always run the same algorithm, so a GPU run repeats its own bits.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "meshtrain/core/bf16.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/kernels/gemm.hpp"

namespace meshtrain::kernels::cuda {

class CudaAllocator;

// The element type of a matrix or vector in a product.
enum class MatmulType : uint8_t { F32, BF16 };
const char* matmul_type_name(MatmulType type);  // "fp32", "bf16"

template <class T>
constexpr MatmulType matmul_type_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, Bf16>, "matmul operands are float or Bf16");
  return std::is_same_v<T, float> ? MatmulType::F32 : MatmulType::BF16;
}

// A matrix or vector a product reads: a DevicePtr<float> or DevicePtr<Bf16>,
// const or not. Default-constructed: absent (no bias, ...).
class MatmulInput {
 public:
  MatmulInput() = default;
  template <class T>
  MatmulInput(DevicePtr<T> p) : ptr_(p.raw()), type_(matmul_type_of<std::remove_const_t<T>>()) {}
  const void* raw() const { return ptr_; }
  MatmulType type() const { return type_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  const void* ptr_ = nullptr;
  MatmulType type_ = MatmulType::F32;
};

// A matrix or vector a product writes: a DevicePtr<float> or DevicePtr<Bf16>.
class MatmulOutput {
 public:
  MatmulOutput() = default;
  template <class T>
    requires(!std::is_const_v<T>)
  MatmulOutput(DevicePtr<T> p) : ptr_(p.raw()), type_(matmul_type_of<T>()) {}
  void* raw() const { return ptr_; }
  MatmulType type() const { return type_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  MatmulType type_ = MatmulType::F32;
};

// How the weight (and its gradient) is stored, row-major; see the top.
enum class WeightLayout : uint8_t {
  InOut,  // (K, N) = (in, out): Conv1D, meshtrain's nn::Linear
  OutIn,  // (N, K) = (out, in): nn.Linear, the tied classifier's wte
};
const char* weight_layout_name(WeightLayout layout);  // "InOut", "OutIn"

// The sizes of one linear layer (see the table above), each at least 1, and
// the layout of its weight: MatmulShape{M, N, K} is meshtrain's (in, out),
// MatmulShape{M, N, K, WeightLayout::OutIn} nn.Linear's.
struct MatmulShape {
  int M = 0, N = 0, K = 0;
  WeightLayout layout = WeightLayout::InOut;
};

// One cuBLASLt handle, its 32 MiB workspace (Hopper's kernels want one) and
// the plans made so far, for the current GPU; products are issued on the
// allocator's stream, in order with its copies. `allocator` must outlive the
// context. Not thread-safe: one context per stream.
//
// Errors: a cuBLASLt call that fails throws DeviceError naming the call
// (MESHTRAIN_CUBLAS_CHECK), a product cuBLASLt has no algorithm for throws
// DeviceError naming the product; arguments that break the contracts here
// (types, alignment, sizes) throw std::invalid_argument.
class CublasLtContext {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  explicit CublasLtContext(CudaAllocator& allocator);
  ~CublasLtContext();
  CublasLtContext(const CublasLtContext&) = delete;
  CublasLtContext& operator=(const CublasLtContext&) = delete;

  // out (M, N) = inp (M, K) @ W [+ bias (N)] (InOut; inp @ W^T for OutIn),
  // or += with accumulate (beta = 1).
  void forward(MatmulOutput out, MatmulInput inp, MatmulInput weight, MatmulShape shape, MatmulInput bias = {},
               bool accumulate = false);

  // pre (M, N) = forward's product [+ bias (N)] and out (M, N) = gelu(pre),
  // in one product (GELU_AUX[_BIAS]; cuBLASLt's GELU, the tanh form). pre is
  // what backward_input_gelu needs later. N must be a multiple of 8
  // (cuBLASLt's rule for the saved matrix's row stride).
  void forward_gelu(MatmulOutput out, MatmulOutput pre, MatmulInput inp, MatmulInput weight, MatmulShape shape,
                    MatmulInput bias = {});

  // dinp (M, K) = dout (M, N) @ W^T (InOut; dout @ W for OutIn), or += with
  // accumulate.
  void backward_input(MatmulOutput dinp, MatmulInput dout, MatmulInput weight, MatmulShape shape,
                      bool accumulate = false);

  // dinp (M, K) = backward_input's product * gelu'(pre (M, K)) (DGELU): the
  // gradient through the GELU whose output was this layer's input, pre
  // being what forward_gelu saved for it. K must be a multiple of 8.
  void backward_input_gelu(MatmulOutput dinp, MatmulInput pre, MatmulInput dout, MatmulInput weight,
                           MatmulShape shape);

  // dweight = inp^T @ dout, (K, N) (InOut; dout^T @ inp, (N, K), for OutIn),
  // or += with accumulate (the usual case: gradients accumulate over
  // micro-batches). With dbias, also dbias (N) = the sum of dout's rows in the
  // same product (BGRADA for InOut, BGRADB for OutIn); dbias is overwritten,
  // never accumulated, whatever `accumulate` says.
  void backward_weight(MatmulOutput dweight, MatmulInput dout, MatmulInput inp, MatmulShape shape,
                       bool accumulate = false, MatmulOutput dbias = {});

  // The general row-major product, kernels/gemm.hpp's and gemm_bf16.hpp's
  // meaning (the GPU backend's gemm, gemm_bf16 and gemm_bf16_rounded):
  //
  //   C (M, N) = alpha op(A) op(B) [+ bias (N), on every row] + beta C
  //
  // op(A) (M, K) and op(B) (K, N), op(X) being X or X^T as trans_a / trans_b
  // say; lda, ldb, ldc are row strides in elements, each at least its
  // matrix's row length as stored (A: K, or M transposed; B: N, or K
  // transposed; C: N). A and B are both fp32 or both bf16; C is fp32, or
  // bf16 for bf16 operands, and then alpha must be 1 and beta 0 (C =
  // bf16(op(A) op(B) [+ bias])); the bias is fp32. beta = 0 never reads C.
  // M, N and K are at least 1 (an empty product is the caller's).
  //
  // Unlike the layer forms above, pointers and strides may have any
  // alignment: the plan (one per transposes, sizes, strides, types,
  // epilogue, alignments and whether alpha and beta are zero) is made for the
  // alignment they have. The bias goes through cuBLASLt's BIAS epilogue where
  // alpha is 1, the bias is 16-byte aligned and cuBLASLt has an algorithm
  // for it (an fp32 bias with a bf16 C); otherwise as the CPU's fallback:
  // C = (beta C or 0) + bias first, then the product accumulated onto it,
  // into an fp32 scratch the context keeps (grown, never shrunk) for a bf16
  // C, rounded into C after.
  void gemm(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, MatmulInput A, int lda, MatmulInput B,
            int ldb, float beta, MatmulOutput C, int ldc, MatmulInput bias = {});

  // How many products have a plan (descriptors + algorithm) so far.
  size_t plan_count() const;
  cudaStream_t stream() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace meshtrain::kernels::cuda
