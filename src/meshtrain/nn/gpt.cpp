#include "meshtrain/nn/gpt.hpp"

#include <cmath>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/gemm.hpp"

namespace meshtrain {

using kernels::Trans;

namespace {
const GptConfig& checked(const GptConfig& c, const nn::TensorParallelComm* tp) {
  if (c.n_layer <= 0 || c.n_embd <= 0 || c.n_head <= 0 || c.block_size <= 0 || c.vocab_size <= 0)
    throw ConfigError("gpt: n_layer, n_embd, n_head, block_size and vocab_size must be positive");
  if (c.n_embd % c.n_head != 0)
    throw ConfigError("gpt: n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                      std::to_string(c.n_head));
  // Before any layer declares its shard, as a configuration error: the layers'
  // own checks would name a tensor, not the setting to change.
  const int ways = tp ? tp->size() : 1;
  if (c.n_head % ways != 0)
    throw ConfigError("gpt: n_head " + std::to_string(c.n_head) + " is not divisible by the " +
                      std::to_string(ways) + " tensor-parallel ways");
  if (c.vocab_size % ways != 0)
    throw ConfigError("gpt: vocab_size " + std::to_string(c.vocab_size) + " is not divisible by the " +
                      std::to_string(ways) + " tensor-parallel ways (wte is split by vocabulary rows, " +
                      "without padding: choose a vocab_size that is a multiple of " + std::to_string(ways) + ")");
  return c;
}

// Declared in order h.0 ... h.{L-1}, between wpe and ln_f, as GPT2Model lists them.
std::vector<std::unique_ptr<nn::Block>> make_blocks(ParamStore& store, const GptConfig& c,
                                                    nn::TensorParallelComm* tp) {
  std::vector<std::unique_ptr<nn::Block>> blocks;
  for (int64_t i = 0; i < c.n_layer; ++i)
    blocks.push_back(std::make_unique<nn::Block>(store, "h." + std::to_string(i), c.n_embd, c.n_head, true, tp));
  return blocks;
}
}  // namespace

Gpt::Gpt(const GptConfig& config, nn::TensorParallelComm* tp)
    : config_(checked(config, tp)),
      tp_(tp),
      embed_(store_, "wte.weight", "wpe.weight", config.vocab_size, config.block_size, config.n_embd, tp),
      blocks_(make_blocks(store_, config_, tp)),
      ln_f_(store_, "ln_f", config.n_embd, tp),
      xent_(tp, config.vocab_size) {
  store_.allocate();
}

void Gpt::init_parameters(Rng& rng) {
  const float stddev = 0.02f;
  const float proj_stddev = 0.02f / std::sqrt(2.0f * config_.n_layer);
  embed_.init(rng, stddev);
  for (auto& block : blocks_) block->init(rng, stddev, proj_stddev);
  ln_f_.init();
}

int64_t Gpt::local_rows(int64_t B, int64_t T) const {
  if (!nn::sequence_parallel(tp_)) return B * T;
  const int64_t ways = tp_->size();
  if ((B * T) % ways != 0)
    throw Error("gpt: sequence parallelism splits the batch's B x T = " + std::to_string(B) + " x " +
                std::to_string(T) + " = " + std::to_string(B * T) + " tokens over the " + std::to_string(ways) +
                " tensor-parallel ways; B x T must be a multiple of " + std::to_string(ways));
  return B * T / ways;
}

const float* Gpt::trunk_forward(const int32_t* tokens, int64_t B, int64_t T) {
  const int64_t rows = local_rows(B, T);
  const float* x = embed_.forward(tokens, B, T);  // (B, T, C), this rank's rows
  for (auto& block : blocks_) x = block->forward(x, B, T);
  return ln_f_.forward(x, rows);
}

ForwardResult Gpt::forward(const Batch& batch) {
  const int64_t B = batch.batch_size, T = batch.seq_len, C = config_.n_embd, V = embed_.vocab_rows();
  if (B <= 0 || T <= 0 || T > config_.block_size)
    throw Error("gpt: batch (" + std::to_string(B) + ", " + std::to_string(T) + ") needs B > 0 and 0 < T <= " +
                std::to_string(config_.block_size));
  if (batch.tokens.size() < static_cast<size_t>(B * T) || batch.targets.size() < static_cast<size_t>(B * T))
    throw Error("gpt: batch holds fewer than B*T = " + std::to_string(B * T) + " tokens or targets");
  B_ = B;
  T_ = T;
  lnf_ = trunk_forward(batch.tokens.data(), B, T);
  if (nn::sequence_parallel(tp_)) {
    lnf_all_.ensure(B * T * C);
    tp_->all_gather(lnf_, lnf_all_.data(), static_cast<size_t>(local_rows(B, T) * C));  // -> (B*T, C)
    lnf_ = lnf_all_.data();
  }
  logits_.ensure(B * T * V);
  // logits (B*T, V) = ln_f (B*T, C) wte^T (C, V), V: this rank's vocabulary rows
  kernels::gemm(Trans::No, Trans::Yes, static_cast<int>(B * T), static_cast<int>(V), static_cast<int>(C), 1.0f,
                lnf_, static_cast<int>(C), store_.param(embed_.wte_index()), static_cast<int>(C), 0.0f,
                logits_.data(), static_cast<int>(V));
  return xent_.forward(logits_.data(), batch.targets.data(), B * T);
}

void Gpt::backward() {
  if (!lnf_) throw Error("gpt: backward() called before forward()");
  const int64_t N = B_ * T_, C = config_.n_embd, V = embed_.vocab_rows(), rows = local_rows(B_, T_);
  const bool seq = nn::sequence_parallel(tp_);
  const int n = static_cast<int>(N), c = static_cast<int>(C), v = static_cast<int>(V);
  float* dlogits = logits_.data();  // in place
  xent_.backward(dlogits);
  float* dlnf = nn::Workspace::get(ws_.dln, rows * C);  // (B, T, C), this rank's rows
  float* dres = (dres_.ensure(rows * C), dres_.data());
  // Under sequence parallelism the whole-row dlnf goes over the gathered
  // ln_f output, which the dwte GEMM reads first.
  float* dlnf_all = seq ? lnf_all_.data() : dlnf;  // (B*T, C)
  // Tied output layer: dwte (V, C) += dlogits^T (V, N) lnf (N, C); dlnf = dlogits wte.
  kernels::gemm(Trans::Yes, Trans::No, v, c, n, 1.0f, dlogits, v, lnf_, c, 1.0f, store_.grad(embed_.wte_index()), c);
  kernels::gemm(Trans::No, Trans::No, n, c, v, 1.0f, dlogits, v, store_.param(embed_.wte_index()), c, 0.0f, dlnf_all,
                c);
  // Each rank's dlnf covers its vocabulary columns only.
  if (seq)
    tp_->reduce_scatter_sum(dlnf_all, dlnf, static_cast<size_t>(rows * C));  // -> (B*T/TP, C)
  else if (tp_)
    tp_->all_reduce_sum(dlnf, static_cast<size_t>(N * C));
  ln_f_.backward(dres, dlnf);
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) (*it)->backward(dres, ws_);
  embed_.backward(dres);
  lnf_ = nullptr;  // a second backward() without forward() would read dlogits as logits
}

std::span<const float> Gpt::last_logits(std::span<const int32_t> tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size()), C = config_.n_embd, V = config_.vocab_size;
  if (tp_ && tp_->size() > 1)
    throw Error("gpt: generation runs in one process, but this model is split over " +
                std::to_string(tp_->size()) + " tensor-parallel ranks; consolidate the checkpoint " +
                "(meshtrain consolidate) and generate from one process");
  if (T <= 0 || T > config_.block_size)
    throw Error("gpt: last_logits needs 1 to " + std::to_string(config_.block_size) + " tokens, got " +
                std::to_string(T));
  const float* lnf = trunk_forward(tokens.data(), 1, T);
  lnf_ = nullptr;  // saved activations now belong to this sequence, not a training batch
  logits_.ensure(V);
  // Only the last row: logits (1, V) = lnf[T-1] (1, C) wte^T.
  kernels::gemm(Trans::No, Trans::Yes, 1, static_cast<int>(V), static_cast<int>(C), 1.0f, lnf + (T - 1) * C,
                static_cast<int>(C), store_.param(embed_.wte_index()), static_cast<int>(C), 0.0f, logits_.data(),
                static_cast<int>(V));
  return {logits_.data(), static_cast<size_t>(V)};
}

double Gpt::flops_per_sample() const {
  const double L = config_.n_layer, C = config_.n_embd, V = config_.vocab_size, T = config_.block_size;
  const double n_matmul = L * 12.0 * C * C + V * C;
  return 6.0 * n_matmul + 12.0 * L * C * T;
}

}  // namespace meshtrain
