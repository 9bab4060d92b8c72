#include "meshtrain/kernels/cuda/matmul.hpp"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/cuda/cuda_check.hpp"
#include "meshtrain/kernels/cuda/cuda_memory.hpp"
#include "meshtrain/kernels/cuda/rows.hpp"

// Row-major through a column-major library, by swapping the operands (llm.c's
// matmul_cublaslt does the same). cuBLASLt reads matrices column-major, and a
// row-major (r, c) matrix with row stride c is, byte for byte, the
// column-major (c x r) matrix with leading dimension c: its transpose X^T. So
// row-major Y = X1 @ X2 is column-major Y^T = X2^T @ X1^T: cuBLASLt's
// D (m x n) = op(A) (m x k) @ op(B) (k x n) computes it with D = Y^T,
// op(A) = X2^T and op(B) = X1^T. A and B are the operands as they lie in
// memory: "X^T (c x r), op" below is the row-major X (r, c) as stored, read
// column-major with ld = c (make_layout takes the row-major (r, c)), and the
// op that turns it into op(A) or op(B) (N: as is, T: transposed).
//
//                    Y = X1 @ X2        D (m x n)       A, op              B, op              m  n  k
// InOut: W (K, N) = (in, out), Conv1D, meshtrain's nn::Linear
//   forward          out = inp @ W      out^T (N x M)   W^T (N x K), N     inp^T (K x M), N   N  M  K
//   backward_input   dinp = dout @ W^T  dinp^T (K x M)  W^T (N x K), T     dout^T (N x M), N  K  M  N
//   backward_weight  dW = inp^T @ dout  dW^T (N x K)    dout^T (N x M), N  inp^T (K x M), T   N  K  M
// OutIn: W (N, K) = (out, in), nn.Linear, the tied classifier's wte
//   forward          out = inp @ W^T    out^T (N x M)   W^T (K x N), T     inp^T (K x M), N   N  M  K
//   backward_input   dinp = dout @ W    dinp^T (K x M)  W^T (K x N), N     dout^T (N x M), N  K  M  N
//   backward_weight  dW = dout^T @ inp  dW^T (K x N)    inp^T (K x M), N   dout^T (N x M), T  K  N  M
//
// Between the layouts, forward and backward_input differ only in A's op and
// ld: D is the same, and so are the epilogues. A bias has one value per row
// of D (an output feature, N of them); the GELU's saved matrix is shaped like
// D, ld = D's rows (N in forward, K in backward_input). backward_weight swaps
// A and B: the bias gradient, dout's column sums, is a sum over k of whichever
// operand dout is: A (not transposed) in InOut, so BGRADA, one value per row
// of D; B (transposed) in OutIn, so BGRADB, one per column of D. cuBLASLt
// offers BGRADA only with a non-transposed A and BGRADB only with a
// transposed B, which is what each layout has.
//
// The general product (gemm(), kernels/gemm.hpp's meaning) is the same
// identity with the caller's ops and strides: row-major C (M, N) = op(X1)
// op(X2) is column-major C^T (N x M) = op(X2)^T op(X1)^T, so cuBLASLt's A is
// X2 as stored, its op T where X2 is transposed, its B is X1 likewise, m = N,
// n = M, k = K, and every row stride is a leading dimension.

namespace meshtrain::kernels::cuda {

const char* matmul_type_name(MatmulType type) { return type == MatmulType::F32 ? "fp32" : "bf16"; }
const char* weight_layout_name(WeightLayout layout) { return layout == WeightLayout::InOut ? "InOut" : "OutIn"; }

namespace {

enum class Form : uint8_t { Forward, BackwardInput, BackwardWeight, General };
enum class Epilogue : uint8_t { None, Bias, GeluAux, GeluAuxBias, Dgelu, BiasGrad };

const char* form_name(Form form) {
  switch (form) {
    case Form::Forward: return "forward";
    case Form::BackwardInput: return "backward_input";
    case Form::BackwardWeight: return "backward_weight";
    case Form::General: return "gemm";
  }
  return "?";
}

const char* epilogue_name(Epilogue epilogue, WeightLayout layout) {
  switch (epilogue) {
    case Epilogue::None: return "DEFAULT";
    case Epilogue::Bias: return "BIAS";
    case Epilogue::GeluAux: return "GELU_AUX";
    case Epilogue::GeluAuxBias: return "GELU_AUX_BIAS";
    case Epilogue::Dgelu: return "DGELU";
    case Epilogue::BiasGrad: return layout == WeightLayout::InOut ? "BGRADA" : "BGRADB";
  }
  return "?";
}

// The bias gradient reduces dout: A in InOut, B in OutIn (see the top).
cublasLtEpilogue_t cublas_epilogue(Epilogue epilogue, WeightLayout layout) {
  switch (epilogue) {
    case Epilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::GeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::GeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::Dgelu: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::BiasGrad:
      return layout == WeightLayout::InOut ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool has_vector(Epilogue e) { return e == Epilogue::Bias || e == Epilogue::GeluAuxBias || e == Epilogue::BiasGrad; }
bool has_aux(Epilogue e) { return e == Epilogue::GeluAux || e == Epilogue::GeluAuxBias || e == Epilogue::Dgelu; }

cudaDataType_t cuda_type(MatmulType type) { return type == MatmulType::F32 ? CUDA_R_32F : CUDA_R_16BF; }
size_t element_bytes(MatmulType type) { return type == MatmulType::F32 ? sizeof(float) : sizeof(Bf16); }

// The alignment in bytes, at most 16, of every row start of a matrix at p
// with row stride ld elements of `element` bytes.
uint32_t row_alignment(const void* p, int64_t ld, size_t element) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(p) | (uintptr_t(ld) * element);
  uint32_t alignment = 16;
  while (alignment > 1 && bits % alignment != 0) alignment /= 2;
  return alignment;
}

// cuBLASLt is told every pointer is at least this aligned (the default it
// assumes is 256), so the algorithm chosen for a shape suits any buffer the
// contract in matmul.hpp allows, not only the one of its first call.
constexpr uint32_t kAlignment = 16;

// What a plan is made for: the key of the plan cache. The form and the
// weight's layout fix the transposes.
struct PlanKey {
  int M = 0, N = 0, K = 0;
  WeightLayout layout = WeightLayout::InOut;
  MatmulType operands = MatmulType::F32;
  MatmulType out = MatmulType::F32;
  Form form = Form::Forward;
  Epilogue epilogue = Epilogue::None;
  // Form::General's own (defaults elsewhere): the caller's ops, row strides,
  // the alignment in bytes (16, 8, 4 or 2) of every row start of cuBLASLt's
  // A (the caller's B), B (the caller's A) and C = D, and whether alpha and
  // beta are zero. Its bias, where there is one, is fp32.
  bool trans_a = false, trans_b = false;
  int lda = 0, ldb = 0, ldc = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0;
  bool alpha_zero = false, beta_zero = false;
  auto operator<=>(const PlanKey&) const = default;
};

// "forward InOut M=37 N=50257 K=96 bf16->bf16 epilogue BIAS"
std::string describe(const PlanKey& key) {
  if (key.form == Form::General)  // "gemm N T M=37 N=99 K=50 lda=50 ldb=50 ldc=99 bf16->bf16 epilogue BIAS align 16/16/8"
    return std::string("gemm ") + (key.trans_a ? "T" : "N") + " " + (key.trans_b ? "T" : "N") +
           " M=" + std::to_string(key.M) + " N=" + std::to_string(key.N) + " K=" + std::to_string(key.K) +
           " lda=" + std::to_string(key.lda) + " ldb=" + std::to_string(key.ldb) + " ldc=" + std::to_string(key.ldc) +
           " " + matmul_type_name(key.operands) + "->" + matmul_type_name(key.out) + " epilogue " +
           epilogue_name(key.epilogue, key.layout) + (key.epilogue == Epilogue::Bias ? " (fp32 bias)" : "") +
           " align " + std::to_string(key.align_a) + "/" + std::to_string(key.align_b) + "/" +
           std::to_string(key.align_c);
  return std::string(form_name(key.form)) + " " + weight_layout_name(key.layout) + " M=" + std::to_string(key.M) +
         " N=" + std::to_string(key.N) + " K=" + std::to_string(key.K) + " " + matmul_type_name(key.operands) + "->" +
         matmul_type_name(key.out) + " epilogue " + epilogue_name(key.epilogue, key.layout);
}

// D's rows in cuBLASLt's terms (the table above): the saved GELU matrix's ld.
int64_t d_rows(const PlanKey& key) { return key.form == Form::Forward ? key.N : key.K; }

// One matrix or vector of a call, named for error messages.
struct Operand {
  const void* ptr = nullptr;
  MatmulType type = MatmulType::F32;
  const char* name = "";
};

// One product to run: its key and its operands in cuBLASLt's roles.
struct Call {
  PlanKey key;
  Operand a, b, d;
  Operand vector;  // bias, or the bias gradient BGRADA / BGRADB writes
  Operand aux;     // the GELU's pre-activation: written by GELU_AUX, read by DGELU
  bool accumulate = false;
  float alpha = 1.0f;
  float beta = 1.0f;  // with accumulate (else 0)
};

[[noreturn]] void bad_call(const PlanKey& key, const std::string& what) {
  throw std::invalid_argument("matmul " + describe(key) + ": " + what);
}

void check_operand(const PlanKey& key, const Operand& operand, MatmulType want) {
  if (!operand.ptr) bad_call(key, std::string(operand.name) + " is null");
  if (operand.type != want)
    bad_call(key, std::string(operand.name) + " is " + matmul_type_name(operand.type) + ", not " +
                      matmul_type_name(want));
  if (reinterpret_cast<uintptr_t>(operand.ptr) % kAlignment != 0)
    bad_call(key, std::string(operand.name) + " is not " + std::to_string(kAlignment) + "-byte aligned");
}

void check_call(const Call& call) {
  const PlanKey& key = call.key;
  if (key.M < 1 || key.N < 1 || key.K < 1) bad_call(key, "every size must be at least 1");
  if (key.operands == MatmulType::F32 && key.out != MatmulType::F32)
    bad_call(key, "fp32 operands give an fp32 output");
  check_operand(key, call.a, key.operands);
  check_operand(key, call.b, key.operands);
  check_operand(key, call.d, key.out);
  if (has_vector(key.epilogue)) check_operand(key, call.vector, key.out);
  if (has_aux(key.epilogue)) {
    check_operand(key, call.aux, key.out);
    if (d_rows(key) % 8 != 0)
      bad_call(key, std::string("the GELU's saved matrix needs a row length that is a multiple of 8 (") +
                        (key.form == Form::Forward ? "N" : "K") + " = " + std::to_string(d_rows(key)) + ")");
    if (call.accumulate) bad_call(key, "a GELU epilogue cannot accumulate");
  }
}

// A matrix's row-major shape, as stored, and its row stride (0: cols).
struct RowMajor {
  int rows = 0, cols = 0;
  int ld = 0;
};

// One product in cuBLASLt's terms, the table at the top: the ops on A and B
// and the row-major shapes of A, B and D as stored.
struct Mapping {
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  RowMajor a, b, d;
};

Mapping mapping(const PlanKey& key) {
  const int M = key.M, N = key.N, K = key.K;
  const bool in_out = key.layout == WeightLayout::InOut;
  const RowMajor weight = in_out ? RowMajor{K, N} : RowMajor{N, K};
  switch (key.form) {
    case Form::Forward:  // A = weight, B = inp (M, K), D = out (M, N)
      return {in_out ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, weight, {M, K}, {M, N}};
    case Form::BackwardInput:  // A = weight, B = dout (M, N), D = dinp (M, K)
      return {in_out ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, weight, {M, N}, {M, K}};
    case Form::BackwardWeight:  // D = dweight, shaped like the weight
      if (in_out) return {CUBLAS_OP_N, CUBLAS_OP_T, {M, N}, {M, K}, weight};  // A = dout, B = inp
      return {CUBLAS_OP_N, CUBLAS_OP_T, {M, K}, {M, N}, weight};              // A = inp, B = dout
    case Form::General: {  // A = the caller's B, B = the caller's A, D = C (see the top)
      const RowMajor caller_a = key.trans_a ? RowMajor{K, M, key.lda} : RowMajor{M, K, key.lda};
      const RowMajor caller_b = key.trans_b ? RowMajor{N, K, key.ldb} : RowMajor{K, N, key.ldb};
      return {key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, caller_b, caller_a,
              {M, N, key.ldc}};
    }
  }
  return {};
}

// The column-major layout of a row-major matrix as stored (see the top).
void make_layout(cublasLtMatrixLayout_t* layout, MatmulType type, RowMajor x) {
  MESHTRAIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, cuda_type(type), uint64_t(x.cols), uint64_t(x.rows),
                                                    int64_t(x.ld ? x.ld : x.cols)));
}

// One product's cuBLASLt objects: the descriptor, the layouts of A, B and D
// (C is D: beta = 1 reads the output in place) and the algorithm chosen.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // False only for a general product with a bias that cuBLASLt has no
  // algorithm for (an fp32 bias on a bf16 C, a stride too odd for the
  // epilogue): gemm() then adds the bias itself.
  bool found = true;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {  // statuses ignored: nothing to do about a failed destroy
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct PreferenceGuard {
  cublasLtMatmulPreference_t pref = nullptr;
  ~PreferenceGuard() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};

// The pointer attributes change from call to call; cuBLASLt reads them at
// each cublasLtMatmul (and the heuristic reads their alignment).
void set_pointers(const Plan& plan, const Call& call) {
  if (has_vector(call.key.epilogue)) {
    const void* vector = call.vector.ptr;
    MESHTRAIN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector, sizeof vector));
  }
  if (has_aux(call.key.epilogue)) {
    const void* aux = call.aux.ptr;
    MESHTRAIN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  }
}

}  // namespace

struct CublasLtContext::State {
  explicit State(CudaAllocator& allocator)
      : allocator(&allocator), stream(allocator.stream()), workspace(allocator, kWorkspaceBytes, MemoryKind::Other) {
    MESHTRAIN_CUBLAS_CHECK(cublasLtCreate(&handle));
  }
  ~State() {
    plans.clear();
    if (handle) cublasLtDestroy(handle);
  }  // then the workspace goes back, ordered after the products on the stream

  const Plan& plan_for(const Call& call);
  std::unique_ptr<Plan> make_plan(const Call& call);
  void run(const Call& call);
  void run_general(Call call);
  float* scratch_floats(size_t n);

  CudaAllocator* allocator;
  cudaStream_t stream;
  DeviceBuffer<std::byte> workspace;
  DeviceBuffer<float> scratch;  // a bf16 C's fp32 product where the bias is not the epilogue's
  cublasLtHandle_t handle = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

// The descriptor and layouts of the table at the top, and the heuristic's
// first algorithm for them, kept for every later call with the same key.
std::unique_ptr<Plan> CublasLtContext::State::make_plan(const Call& call) {
  const PlanKey& key = call.key;
  auto plan = std::make_unique<Plan>();
  MESHTRAIN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const Mapping map = mapping(key);
  MESHTRAIN_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &map.transa, sizeof map.transa));
  MESHTRAIN_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &map.transb, sizeof map.transb));
  const cublasLtEpilogue_t epilogue = cublas_epilogue(key.epilogue, key.layout);
  MESHTRAIN_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  if (has_aux(key.epilogue)) {
    const int64_t aux_ld = d_rows(key);
    MESHTRAIN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
  }
  // The general product's bias is fp32 whatever C is (cuBLASLt's default is C's type).
  const bool fp32_bias_on_bf16 =
      key.form == Form::General && key.epilogue == Epilogue::Bias && key.out != MatmulType::F32;
  if (fp32_bias_on_bf16) {
    const int32_t bias_type = CUDA_R_32F;
    MESHTRAIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                          &bias_type, sizeof bias_type));
  }
  set_pointers(*plan, call);

  make_layout(&plan->a, key.operands, map.a);
  make_layout(&plan->b, key.operands, map.b);
  make_layout(&plan->d, key.out, map.d);

  PreferenceGuard preference;
  MESHTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.pref));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  MESHTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes));
  // The layer forms' contract is 16 bytes; the general product's are its key's.
  const bool general = key.form == Form::General;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, general ? key.align_a : kAlignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, general ? key.align_b : kAlignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, general ? key.align_c : kAlignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, general ? key.align_c : kAlignment}};
  for (const auto& [attribute, bytes] : alignments) {
    MESHTRAIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.pref, attribute, &bytes, sizeof bytes));
  }

  // The heuristic's first answer, kept: asking again per call could answer
  // differently (another workspace, another library version's cache), and a
  // run would no longer repeat its own bits.
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d,
                                                               plan->d, preference.pref, 1, &result, &found);
  const bool none = status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0);
  // The general product with a bias has a way without cuBLASLt's epilogue
  // (gemm() adds the bias itself), so a refusal of the epilogue takes it: a
  // library may answer an fp32 bias on bf16 output with INVALID_VALUE, or a
  // failed result, rather than NOT_SUPPORTED. Other failures (allocation,
  // internal) stay errors: the plan is kept for the run, and a rank that
  // fell back on a passing failure would no longer have its peers' bits.
  const bool refused = none || status == CUBLAS_STATUS_INVALID_VALUE ||
                       (status == CUBLAS_STATUS_SUCCESS && result.state != CUBLAS_STATUS_SUCCESS);
  if (refused && key.form == Form::General && key.epilogue == Epilogue::Bias) {
    plan->found = false;
    return plan;
  }
  if (none)
    throw DeviceError("cuBLASLt has no algorithm for the product " + describe(key) + " within a " +
                      std::to_string(kWorkspaceBytes >> 20) + " MiB workspace");
  if (status != CUBLAS_STATUS_SUCCESS)
    throw_cublas_error(status, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  if (result.state != CUBLAS_STATUS_SUCCESS)
    throw_cublas_error(result.state, "cublasLtMatmulAlgoGetHeuristic (its result)", __FILE__, __LINE__);
  plan->algo = result.algo;
  return plan;
}

const Plan& CublasLtContext::State::plan_for(const Call& call) {
  auto it = plans.find(call.key);
  if (it == plans.end()) it = plans.emplace(call.key, make_plan(call)).first;
  return *it->second;
}

void CublasLtContext::State::run(const Call& call) {
  if (call.key.form != Form::General) check_call(call);  // gemm() checks its own
  const Plan& plan = plan_for(call);
  if (!plan.found) throw DeviceError("cuBLASLt has no algorithm for the product " + describe(call.key));
  set_pointers(plan, call);
  const float alpha = call.alpha;
  const float beta = call.accumulate ? call.beta : 0.0f;
  void* d = const_cast<void*>(call.d.ptr);
  MESHTRAIN_CUBLAS_CHECK(cublasLtMatmul(handle, plan.desc, &alpha, call.a.ptr, plan.a, call.b.ptr, plan.b, &beta,
                                        d, plan.d, d, plan.d, &plan.algo, workspace.ptr().raw(), kWorkspaceBytes,
                                        stream));
}

// gemm()'s product, checked (see matmul.hpp for where the bias goes).
void CublasLtContext::State::run_general(Call call) {
  const int M = call.key.M, N = call.key.N;
  const auto* bias = static_cast<const float*>(call.vector.ptr);
  call.key.epilogue = bias ? Epilogue::Bias : Epilogue::None;
  if (!bias) return run(call);
  const bool epilogue_ok = call.alpha == 1.0f && reinterpret_cast<uintptr_t>(bias) % kAlignment == 0;
  if (epilogue_ok && plan_for(call).found) return run(call);

  // The bias outside the epilogue: C = (beta C or 0) + bias, then the product
  // accumulated onto it (any alpha), as kernels::gemm_bf16 does.
  auto without_bias = [](Call& c) {
    c.key.epilogue = Epilogue::None;
    c.vector = Operand{};
    c.key.beta_zero = false;
    c.accumulate = true;
    c.beta = 1.0f;
  };
  if (call.key.out == MatmulType::F32) {
    scale_add_bias_rows(static_cast<float*>(const_cast<void*>(call.d.ptr)), call.key.ldc, call.beta, bias, M, N,
                        stream);
    without_bias(call);
    return run(call);
  }
  // A bf16 C (alpha 1, beta 0): the product in fp32 into the scratch, with
  // the bias epilogue where it has an algorithm there, then rounded into C.
  float* s = scratch_floats(size_t(M) * size_t(N));
  Call f = call;
  f.d = Operand{s, MatmulType::F32, "scratch"};
  f.key.out = MatmulType::F32;
  f.key.ldc = N;
  f.key.align_c = row_alignment(s, N, sizeof(float));
  if (!(epilogue_ok && plan_for(f).found)) {
    scale_add_bias_rows(s, N, 0.0f, bias, M, N, stream);
    without_bias(f);
  }
  run(f);
  to_bf16_rows(static_cast<Bf16*>(const_cast<void*>(call.d.ptr)), call.key.ldc, s, N, M, N, stream);
}

float* CublasLtContext::State::scratch_floats(size_t n) {
  if (scratch.size() < n) scratch = DeviceBuffer<float>(*allocator, n, MemoryKind::Other);
  return scratch.ptr().raw();
}

namespace {

PlanKey make_key(MatmulShape shape, MatmulType operands, MatmulType out, Form form, Epilogue epilogue) {
  return PlanKey{shape.M, shape.N, shape.K, shape.layout, operands, out, form, epilogue};
}

Operand read_operand(MatmulInput x, const char* name) { return Operand{x.raw(), x.type(), name}; }
Operand written_operand(MatmulOutput x, const char* name) { return Operand{x.raw(), x.type(), name}; }

}  // namespace

CublasLtContext::CublasLtContext(CudaAllocator& allocator) : state_(std::make_unique<State>(allocator)) {}
CublasLtContext::~CublasLtContext() = default;

void CublasLtContext::forward(MatmulOutput out, MatmulInput inp, MatmulInput weight, MatmulShape shape,
                              MatmulInput bias, bool accumulate) {
  Call call;
  call.key = make_key(shape, inp.type(), out.type(), Form::Forward, bias ? Epilogue::Bias : Epilogue::None);
  call.a = read_operand(weight, "weight");
  call.b = read_operand(inp, "inp");
  call.d = written_operand(out, "out");
  call.vector = read_operand(bias, "bias");
  call.accumulate = accumulate;
  state_->run(call);
}

void CublasLtContext::forward_gelu(MatmulOutput out, MatmulOutput pre, MatmulInput inp, MatmulInput weight,
                                   MatmulShape shape, MatmulInput bias) {
  Call call;
  call.key =
      make_key(shape, inp.type(), out.type(), Form::Forward, bias ? Epilogue::GeluAuxBias : Epilogue::GeluAux);
  call.a = read_operand(weight, "weight");
  call.b = read_operand(inp, "inp");
  call.d = written_operand(out, "out");
  call.vector = read_operand(bias, "bias");
  call.aux = written_operand(pre, "pre");
  state_->run(call);
}

void CublasLtContext::backward_input(MatmulOutput dinp, MatmulInput dout, MatmulInput weight, MatmulShape shape,
                                     bool accumulate) {
  Call call;
  call.key = make_key(shape, dout.type(), dinp.type(), Form::BackwardInput, Epilogue::None);
  call.a = read_operand(weight, "weight");
  call.b = read_operand(dout, "dout");
  call.d = written_operand(dinp, "dinp");
  call.accumulate = accumulate;
  state_->run(call);
}

void CublasLtContext::backward_input_gelu(MatmulOutput dinp, MatmulInput pre, MatmulInput dout, MatmulInput weight,
                                          MatmulShape shape) {
  Call call;
  call.key = make_key(shape, dout.type(), dinp.type(), Form::BackwardInput, Epilogue::Dgelu);
  call.a = read_operand(weight, "weight");
  call.b = read_operand(dout, "dout");
  call.d = written_operand(dinp, "dinp");
  call.aux = read_operand(pre, "pre");
  state_->run(call);
}

void CublasLtContext::backward_weight(MatmulOutput dweight, MatmulInput dout, MatmulInput inp, MatmulShape shape,
                                      bool accumulate, MatmulOutput dbias) {
  Call call;
  call.key = make_key(shape, dout.type(), dweight.type(), Form::BackwardWeight,
                      dbias ? Epilogue::BiasGrad : Epilogue::None);
  // A and B per layout (the table at the top): dout is the one BGRAD sums.
  const bool in_out = shape.layout == WeightLayout::InOut;
  call.a = in_out ? read_operand(dout, "dout") : read_operand(inp, "inp");
  call.b = in_out ? read_operand(inp, "inp") : read_operand(dout, "dout");
  call.d = written_operand(dweight, "dweight");
  call.vector = written_operand(dbias, "dbias");
  call.accumulate = accumulate;
  state_->run(call);
}

void CublasLtContext::gemm(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, MatmulInput A, int lda,
                           MatmulInput B, int ldb, float beta, MatmulOutput C, int ldc, MatmulInput bias) {
  Call call;
  PlanKey& key = call.key;
  key.M = M;
  key.N = N;
  key.K = K;
  key.operands = A.type();
  key.out = C.type();
  key.form = Form::General;
  key.trans_a = trans_a == Trans::Yes;
  key.trans_b = trans_b == Trans::Yes;
  key.lda = lda;
  key.ldb = ldb;
  key.ldc = ldc;
  key.alpha_zero = alpha == 0.0f;
  key.beta_zero = beta == 0.0f;
  // cuBLASLt's roles (see the top): its A is the caller's B, its B the caller's A.
  call.a = read_operand(B, "B");
  call.b = read_operand(A, "A");
  call.d = written_operand(C, "C");
  call.vector = read_operand(bias, "bias");
  call.alpha = alpha;
  call.beta = beta;
  call.accumulate = beta != 0.0f;

  if (M < 1 || N < 1 || K < 1) bad_call(key, "every size must be at least 1");
  if (!A || !B || !C) bad_call(key, std::string(!A ? "A" : !B ? "B" : "C") + " is null");
  if (B.type() != A.type())
    bad_call(key, std::string("A is ") + matmul_type_name(A.type()) + " but B is " + matmul_type_name(B.type()));
  if (key.operands == MatmulType::F32 && key.out != MatmulType::F32) bad_call(key, "fp32 operands give an fp32 output");
  if (key.out == MatmulType::BF16 && (alpha != 1.0f || beta != 0.0f))
    bad_call(key, "a bf16 C takes alpha = 1 and beta = 0");
  if (bias && bias.type() != MatmulType::F32) bad_call(key, "the bias must be fp32");
  const int a_cols = key.trans_a ? M : K, b_cols = key.trans_b ? K : N;
  if (lda < a_cols || ldb < b_cols || ldc < N)
    bad_call(key, "a row stride is shorter than its row (lda >= " + std::to_string(a_cols) + ", ldb >= " +
                      std::to_string(b_cols) + ", ldc >= " + std::to_string(N) + ")");

  key.align_a = row_alignment(B.raw(), ldb, element_bytes(B.type()));
  key.align_b = row_alignment(A.raw(), lda, element_bytes(A.type()));
  key.align_c = row_alignment(C.raw(), ldc, element_bytes(C.type()));
  state_->run_general(call);
}

size_t CublasLtContext::plan_count() const { return state_->plans.size(); }
cudaStream_t CublasLtContext::stream() const { return state_->stream; }

}  // namespace meshtrain::kernels::cuda
