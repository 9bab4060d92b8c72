#include "meshtrain/kernels/guarded_backend.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>

#include "meshtrain/core/error.hpp"

namespace meshtrain::kernels {
namespace {

// One reserved region, handed out in pages: opened (read-write) as a whole
// while any backend call runs, closed (PROT_NONE) when the last one returns.
class GuardedMemory final : public DeviceAllocator {
 public:
  GuardedMemory() {
    void* p = mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw DeviceError("cpu-guarded: cannot reserve its address space (mmap failed)");
    base_ = static_cast<char*>(p);
  }

  void* allocate(size_t bytes) override {
    const size_t size = round_up(bytes ? bytes : 1);
    std::lock_guard lock(mutex_);
    size_t offset;
    if (auto it = free_.lower_bound(size); it != free_.end()) {
      offset = it->second;
      if (it->first > size) free_.emplace(it->first - size, offset + size);
      free_.erase(it);
    } else {
      if (top_ + size > kReserve)
        throw DeviceError("cpu-guarded: out of memory (" + std::to_string(kReserve >> 30) + " GiB reserved)");
      offset = top_;
      top_ += size;
      if (depth_ > 0) protect(offset, size, PROT_READ | PROT_WRITE);
    }
    sizes_[offset] = size;
    return base_ + offset;
  }
  void release(void* p) noexcept override {
    std::lock_guard lock(mutex_);
    const size_t offset = size_t(static_cast<char*>(p) - base_);
    const auto it = sizes_.find(offset);
    if (it == sizes_.end()) return;
    madvise(p, it->second, MADV_DONTNEED);  // its pages back to the system; zeros when reused
    free_.emplace(it->second, offset);
    sizes_.erase(it);
  }
  // Whether p is in the reserved region: device memory, as this backend has it.
  bool holds(const void* p) const {
    const auto* c = static_cast<const char*>(p);
    return c >= base_ && c < base_ + kReserve;
  }
  // Throws where p is host memory (null: an optional pointer left out).
  // `what` names it, made only on failure: kernels check every call.
  template <class What>
  void check_on_device(const void* p, What&& what) const {
    if (p && !holds(p))
      throw DeviceError("cpu-guarded: " + std::string(what()) +
                        " is host memory, not the device's: a GPU would fault on it");
  }
  void zero(void* p, size_t bytes) override {
    check_on_device(p, [] { return "zero's destination"; });
    const Open open(*this);
    std::memset(p, 0, bytes);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    check_on_device(dst, [] { return "upload's destination"; });
    const Open open(*this);
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    check_on_device(src, [] { return "download's source"; });
    const Open open(*this);
    std::memcpy(dst, src, bytes);
    ++host_syncs_;
  }
  // Downloads and, counted by the backend, the calls that return a value.
  std::atomic<int64_t> host_syncs_{0};
  std::string name() const override { return "cpu-guarded"; }

  // The region readable and writable while one lives (they nest, and
  // threads of one call may hold their own).
  class Open {
   public:
    explicit Open(GuardedMemory& m) : m_(m) {
      std::lock_guard lock(m_.mutex_);
      if (m_.depth_++ == 0) m_.protect(0, m_.top_, PROT_READ | PROT_WRITE);
    }
    ~Open() {
      std::lock_guard lock(m_.mutex_);
      if (--m_.depth_ == 0) m_.protect(0, m_.top_, PROT_NONE);
    }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    GuardedMemory& m_;
  };

 private:
  static constexpr size_t kReserve = size_t(64) << 30;
  static size_t round_up(size_t bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
  void protect(size_t offset, size_t size, int prot) {
    if (size && mprotect(base_ + offset, size, prot) != 0)
      throw DeviceError("cpu-guarded: mprotect failed: " + std::string(std::strerror(errno)));
  }

  char* base_ = nullptr;
  size_t top_ = 0;  // bytes handed out from base_, free or not
  int depth_ = 0;   // Open objects alive
  std::map<size_t, size_t> sizes_;         // offset -> size of each live allocation
  std::multimap<size_t, size_t> free_;     // size -> offset of each released one
  std::mutex mutex_;
};

class GuardedBackend final : public Backend {
 public:
  Device device() const override { return {DeviceKind::GuardedCpu, 0}; }
  DeviceAllocator& allocator() override { return memory_; }
  int64_t host_syncs() const override { return memory_.host_syncs_.load(); }

  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) override {
    const Open open = enter("encoder_forward", {out, tokens, wte, wpe});
    cpu_.encoder_forward(out, tokens, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) override {
    const Open open = enter("encoder_backward", {dwte, dwpe, dout, tokens});
    cpu_.encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int64_t N, int64_t C) override {
    const Open open = enter("layernorm_forward", {out, mean, rstd, inp, weight, bias});
    cpu_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_forward_rounded(Bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t C) override {
    const Open open = enter("layernorm_forward_rounded", {out16, mean, rstd, inp, weight, bias});
    cpu_.layernorm_forward_rounded(out16, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, const float* dresid, int64_t N,
                          int64_t C) override {
    const Open open = enter("layernorm_backward", {dinp, dweight, dbias, dout, inp, weight, mean, rstd, dresid});
    cpu_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, dresid, N, C);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    const Open open = enter("residual_forward", {out, a, b});
    cpu_.residual_forward(out, a, b, n);
  }
  void gelu_forward(float* out, const float* inp, int64_t n) override {
    const Open open = enter("gelu_forward", {out, inp});
    cpu_.gelu_forward(out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) override {
    const Open open = enter("gelu_backward", {dinp, inp, dout});
    cpu_.gelu_backward(dinp, inp, dout, n);
  }
  void adamw_update(std::span<const AdamWChunk> chunks, const AdamWStep& step) override {
    const Open open = enter("adamw_update", chunks);
    cpu_.adamw_update(chunks, step);
  }
  void momentum_squares(std::span<const MomentumChunk> chunks, double* sums) override {
    const Open open = enter("momentum_squares", chunks);
    ++memory_.host_syncs_;  // the host waits for the sums, as on a GPU
    cpu_.momentum_squares(chunks, sums);
  }
  void momentum_update(std::span<const MomentumChunk> chunks, std::span<const float> trusts,
                       const MomentumStep& step) override {
    const Open open = enter("momentum_update", chunks);
    cpu_.momentum_update(chunks, trusts, step);
  }
  void lamb_moments(std::span<const LambChunk> chunks, const LambStep& step, double* sums) override {
    const Open open = enter("lamb_moments", chunks);
    ++memory_.host_syncs_;
    cpu_.lamb_moments(chunks, step, sums);
  }
  void lamb_apply(std::span<const LambChunk> chunks, std::span<const float> scales, const LambStep& step) override {
    const Open open = enter("lamb_apply", chunks);
    cpu_.lamb_apply(chunks, scales, step);
  }
  double squared_norm(const float* base, size_t begin, size_t end) override {
    const Open open = enter("squared_norm", {base});
    ++memory_.host_syncs_;  // the host waits for the value, as on a GPU
    return cpu_.squared_norm(base, begin, end);
  }
  void squared_norms(const float* base, std::span<const Range> ranges, double* out) override {
    const Open open = enter("squared_norms", {base});
    ++memory_.host_syncs_;  // one wait for them all, as on a GPU
    cpu_.squared_norms(base, ranges, out);
  }
  void scale(float* x, size_t n, float factor) override {
    const Open open = enter("scale", {x});
    cpu_.scale(x, n, factor);
  }
  void sums_in_order(const float* x, size_t n, size_t parts, double* sums) override {
    const Open open = enter("sums_in_order", {x});
    ++memory_.host_syncs_;
    cpu_.sums_in_order(x, n, parts, sums);
  }
  void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
            float beta, float* C, int ldc) override {
    const Open open = enter("gemm", {A, B, C});
    cpu_.gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const Bf16* A, int lda, const Bf16* B,
                 int ldb, float beta, float* C, int ldc, const float* bias) override {
    const Open open = enter("gemm_bf16", {A, B, C, bias});
    cpu_.gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
  }
  void gemm_bf16_rounded(Trans ta, Trans tb, int M, int N, int K, const Bf16* A, int lda, const Bf16* B, int ldb,
                         Bf16* C, int ldc, const float* bias) override {
    const Open open = enter("gemm_bf16_rounded", {A, B, C, bias});
    cpu_.gemm_bf16_rounded(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, bias);
  }
  void run_pair(FunctionRef<void()> first, FunctionRef<void()> after_first, FunctionRef<void()> second) override {
    const Open open(memory_);
    cpu_.run_pair(first, after_first, second);
  }
  void fill_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) override {
    const Open open = enter("fill_rows", {out, bias, residual});
    cpu_.fill_rows(out, bias, residual, M, N);
  }
  void add_rows(float* out, const float* bias, const float* residual, int64_t M, int64_t N) override {
    const Open open = enter("add_rows", {out, bias, residual});
    cpu_.add_rows(out, bias, residual, M, N);
  }
  void bias_backward(float* dbias, const float* dout, int64_t M, int64_t N) override {
    const Open open = enter("bias_backward", {dbias, dout});
    cpu_.bias_backward(dbias, dout, M, N);
  }
  void bias_backward_rounded(float* dbias, Bf16* dout16, const float* dout, int64_t M, int64_t N) override {
    const Open open = enter("bias_backward_rounded", {dbias, dout16, dout});
    cpu_.bias_backward_rounded(dbias, dout16, dout, M, N);
  }
  void gelu_forward_bf16(Bf16* out16, const Bf16* inp16, int64_t n) override {
    const Open open = enter("gelu_forward_bf16", {out16, inp16});
    cpu_.gelu_forward_bf16(out16, inp16, n);
  }
  void gelu_backward_rounded(Bf16* dinp16, float* dbias, const Bf16* inp, const Bf16* dout, int64_t M,
                             int64_t N) override {
    const Open open = enter("gelu_backward_rounded", {dinp16, dbias, inp, dout});
    cpu_.gelu_backward_rounded(dinp16, dbias, inp, dout, M, N);
  }
  void to_bf16(const float* src, Bf16* dst, size_t n) override {
    const Open open = enter("to_bf16", {src, dst});
    cpu_.to_bf16(src, dst, n);
  }
  void widen_divided(const Bf16* src, float* dst, size_t n, float divisor) override {
    const Open open = enter("widen_divided", {src, dst});
    cpu_.widen_divided(src, dst, n, divisor);
  }
  void copy(float* dst, const float* src, size_t n) override {
    const Open open = enter("copy", {dst, src});
    cpu_.copy(dst, src, n);
  }
  void fill(float* dst, size_t n, float value) override {
    const Open open = enter("fill", {dst});
    cpu_.fill(dst, n, value);
  }
  void attention_forward(float* out, AttentionSaved& saved, const float* qkv, int64_t B, int64_t T, int64_t C,
                         int64_t NH, bool causal, const AttentionBf16* bf16) override {
    const Open open = enter("attention_forward", {out, qkv}, bf16);
    cpu_.attention_forward(out, saved, qkv, B, T, C, NH, causal, bf16);
  }
  void attention_recompute(AttentionSaved& saved, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                           bool causal, const AttentionBf16* bf16) override {
    const Open open = enter("attention_recompute", {qkv}, bf16);
    cpu_.attention_recompute(saved, qkv, B, T, C, NH, causal, bf16);
  }
  void attention_backward(float* dqkv, const float* dout, const float* out, AttentionSaved& saved, const float* qkv,
                          int64_t B, int64_t T, int64_t C, int64_t NH, bool causal, float* scratch,
                          const AttentionBf16* bf16) override {
    const Open open = enter("attention_backward", {dqkv, dout, out, qkv, scratch}, bf16);
    cpu_.attention_backward(dqkv, dout, out, saved, qkv, B, T, C, NH, causal, scratch, bf16);
  }
  size_t attention_backward_scratch(const AttentionSaved& saved, int64_t B, int64_t T, int64_t NH,
                                    bool bf16) override {
    const Open open = enter("attention_backward_scratch", {});
    return cpu_.attention_backward_scratch(saved, B, T, NH, bf16);
  }
  void softmax_xent_forward(float* lse, float* loss, float* hit, const float* logits, const int32_t* targets, int64_t N,
                            int64_t V) override {
    const Open open = enter("softmax_xent_forward", {lse, loss, hit, logits, targets});
    cpu_.softmax_xent_forward(lse, loss, hit, logits, targets, N, V);
  }
  void softmax_xent_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                             int64_t N, int64_t V, float dloss, int64_t v0) override {
    const Open open = enter("softmax_xent_backward", {dlogits, logits, lse, targets});
    cpu_.softmax_xent_backward(dlogits, logits, lse, targets, N, V, dloss, v0);
  }
  void row_max_argmax(float* mx, int32_t* arg, const float* logits, int64_t N, int64_t V) override {
    const Open open = enter("row_max_argmax", {mx, arg, logits});
    cpu_.row_max_argmax(mx, arg, logits, N, V);
  }
  void softmax_xent_shard_sums(float* sumexp, float* target_logit, const float* logits, const float* mx,
                               const int32_t* targets, int64_t N, int64_t V, int64_t v0) override {
    const Open open = enter("softmax_xent_shard_sums", {sumexp, target_logit, logits, mx, targets});
    cpu_.softmax_xent_shard_sums(sumexp, target_logit, logits, mx, targets, N, V, v0);
  }
  void shard_argmax_candidates(int32_t* arg, const float* local_max, const float* mx, int64_t N, int64_t v0,
                               int64_t V) override {
    const Open open = enter("shard_argmax_candidates", {arg, local_max, mx});
    cpu_.shard_argmax_candidates(arg, local_max, mx, N, v0, V);
  }
  void shard_loss_rows(float* lse, float* loss, float* hit, const float* mx, const float* sumexp,
                       const float* target_logit, const int32_t* arg, const int32_t* targets, int64_t N) override {
    const Open open = enter("shard_loss_rows", {lse, loss, hit, mx, sumexp, target_logit, arg, targets});
    cpu_.shard_loss_rows(lse, loss, hit, mx, sumexp, target_logit, arg, targets, N);
  }
  void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows,
                              int64_t N, int64_t C) override {
    const Open open = enter("embedding_rows_forward", {out, tokens, wte_rows});
    cpu_.embedding_rows_forward(out, tokens, wte_rows, v0, V_rows, N, C);
  }
  void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0,
                               int64_t V_rows, int64_t N, int64_t C) override {
    const Open open = enter("embedding_rows_backward", {dwte_rows, dout, tokens});
    cpu_.embedding_rows_backward(dwte_rows, dout, tokens, v0, V_rows, N, C);
  }
  void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C) override {
    const Open open = enter("position_add_forward", {x, pos});
    cpu_.position_add_forward(x, pos, B, T, C);
  }
  void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T,
                                 int64_t C) override {
    const Open open = enter("position_add_rows_forward", {x, pos});
    cpu_.position_add_rows_forward(x, pos, row0, rows, T, C);
  }
  void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C) override {
    const Open open = enter("position_add_backward", {dpos, dout});
    cpu_.position_add_backward(dpos, dout, B, T, C);
  }
  void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W, int64_t P) override {
    const Open open = enter("patchify", {patches, pixels});
    cpu_.patchify(patches, pixels, B, ch, H, W, P);
  }
  void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C) override {
    const Open open = enter("meanpool_forward", {out, inp});
    cpu_.meanpool_forward(out, inp, B, T, C);
  }
  void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C) override {
    const Open open = enter("meanpool_backward", {dinp, dout});
    cpu_.meanpool_backward(dinp, dout, B, T, C);
  }
  void gather_rows(float* dst, const float* src, const int32_t* rows, int64_t n, int64_t C) override {
    const Open open = enter("gather_rows", {dst, src, rows});
    cpu_.gather_rows(dst, src, rows, n, C);
  }
  void combine_rows(float* out, const float* base, const float* src, const int32_t* offsets, const int32_t* rows,
                    const float* scales, int64_t N, int64_t C) override {
    const Open open = enter("combine_rows", {out, base, src, offsets, rows, scales});
    cpu_.combine_rows(out, base, src, offsets, rows, scales, N, C);
  }
  void gate_backward_rows(float* dy, float* dgates, const float* dout, const float* y, const int32_t* tokens,
                          const float* gates, int64_t n, int64_t C) override {
    const Open open = enter("gate_backward_rows", {dy, dgates, dout, y, tokens, gates});
    cpu_.gate_backward_rows(dy, dgates, dout, y, tokens, gates, n, C);
  }

 private:
  using Open = GuardedMemory::Open;

  // A kernel's call: its device pointers must be in this backend's memory
  // (null: an optional one left out). A GPU kernel given host memory faults
  // or reads garbage, which the CPU's kernels here would not show: this
  // makes every cpu-guarded run fail where a GPU run would.
  void check(const char* call, std::initializer_list<const void*> device_pointers) const {
    int i = 0;
    for (const void* p : device_pointers) {
      ++i;
      memory_.check_on_device(p, [&] { return std::string(call) + "'s pointer argument " + std::to_string(i); });
    }
  }
  Open enter(const char* call, std::initializer_list<const void*> device_pointers) {
    check(call, device_pointers);
    return Open(memory_);
  }
  Open enter(const char* call, std::initializer_list<const void*> device_pointers, const AttentionBf16* bf16) {
    if (bf16) check(call, {bf16->qkv, bf16->att, bf16->out, bf16->dout});
    return enter(call, device_pointers);
  }
  template <class Chunk>
  Open enter(const char* call, std::span<const Chunk> chunks) {
    for (const Chunk& c : chunks) {
      if constexpr (requires { c.momentum; })
        check(call, {c.param, c.grad, c.momentum});
      else
        check(call, {c.param, c.grad, c.m, c.v});
    }
    return Open(memory_);
  }

  Backend& cpu_ = cpu_backend();
  GuardedMemory memory_;
};

}  // namespace

Backend& guarded_backend() {
  static GuardedBackend backend;
  return backend;
}

}  // namespace meshtrain::kernels
