#pragma once
// GPT-2: token + position embedding, n_layer pre-LN blocks, final layernorm,
// and an output layer tied to the token embedding (logits = ln_f(x) wte^T).
//
// Dims: B batch, T sequence (<= block_size), C n_embd, NH n_head, V vocab, L n_layer,
// TP ranks of the tensor-parallel group.
// Parameter names are Hugging Face GPT2Model's ("wte.weight", "h.0.attn.c_attn.weight", ...)
// with weights stored (in, out) like its Conv1D, so a GPT-2 checkpoint maps 1:1.
//
// Weight decay: on for every 2-D tensor (Linear weights, wte, wpe: nanoGPT's
// rule), off for biases and layernorm parameters.
//
// Tensor parallelism over a group of TP ranks (Megatron's layout): every
// block is split (block.hpp); wte is split by vocabulary rows (embedding.hpp),
// so the tied output layer makes each rank's columns of the logits
// (B*T, V/TP) and the loss combines them without gathering the whole logits
// (vocab_parallel_cross_entropy.hpp); wpe, ln_f and the residual stream stay
// whole on every rank. Every rank of the group holds the same loss. The
// output layer's input gradient (B*T, C) is summed over the group, as a
// column-parallel layer's is.
//
// Sequence parallelism (the group's sequence_parallel(), tensor_parallel.hpp):
// the residual stream, the layernorms (ln_f included) and wpe's addition run
// on each rank's B*T/TP rows; the output layer all-gathers ln_f's rows to
// (B*T, C) before the logits, and its input gradient is reduce-scattered back
// to the rank's rows. The loss is computed as without it, over every row.
// B*T must divide by TP.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/nn/block.hpp"
#include "meshtrain/nn/embedding.hpp"
#include "meshtrain/nn/layernorm.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/nn/vocab_parallel_cross_entropy.hpp"
#include "meshtrain/nn/workspace.hpp"

namespace meshtrain {

struct GptConfig {
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t block_size = 128;  // longest sequence (rows of wpe)
  int64_t vocab_size = 256;  // bytes
};

class Gpt final : public Model {
 public:
  // Declares and allocates every parameter (zeroed); call init_parameters() next.
  // Throws ConfigError on non-positive sizes, n_embd not divisible by n_head,
  // or, with a tensor-parallel group, n_head or vocab_size not divisible by
  // TP (the vocabulary is not padded: pick a multiple of TP).
  explicit Gpt(const GptConfig& config, nn::TensorParallelComm* tp = nullptr);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  std::string kind() const override { return "gpt"; }
  // GPT-2 init: weights ~ N(0, 0.02), the c_proj weights ~ N(0, 0.02 / sqrt(2 L)),
  // biases 0, layernorm weight 1 and bias 0.
  void init_parameters(Rng& rng) override;
  // Reads batch.tokens and batch.targets (B, T) with T = batch.seq_len <= block_size.
  ForwardResult forward(const Batch& batch) override;
  void backward() override;
  // Per token: 6 * N_matmul + 12 * L * C * T with T = block_size, where
  // N_matmul = L * 12 C^2 (c_attn, c_proj, c_fc, c_proj weights) + V * C (tied
  // output layer): the PaLM/Chinchilla count (biases, norms, embedding lookups left out).
  double flops_per_sample() const override;

  // Logits (V) of the last position of one sequence tokens (1, T), T in
  // [1, block_size], for generation (no KV cache). Clobbers what forward()
  // saved for backward(); the span lives until the next call. Generation is
  // one process: throws Error under a tensor-parallel group of more than one
  // rank (each holds V/TP of the logits; consolidate the checkpoint first).
  std::span<const float> last_logits(std::span<const int32_t> tokens);

  const GptConfig& config() const { return config_; }

 private:
  // Embedding, blocks and ln_f over (B, T); returns ln_f's output (B, T, C),
  // under sequence parallelism this rank's rows (B T / TP, C).
  const float* trunk_forward(const int32_t* tokens, int64_t B, int64_t T);
  // The rows of B T this rank holds: all, or B T / TP under sequence
  // parallelism (Error naming B, T and TP when they do not divide).
  int64_t local_rows(int64_t B, int64_t T) const;

  GptConfig config_;
  nn::TensorParallelComm* tp_;
  nn::Embedding embed_;
  std::vector<std::unique_ptr<nn::Block>> blocks_;
  nn::LayerNorm ln_f_;
  nn::VocabParallelCrossEntropy xent_;
  nn::Workspace ws_;
  int64_t B_ = 0, T_ = 0;
  const float* lnf_ = nullptr;                            // (B, T, C), owned by ln_f_ (or lnf_all_)
  AlignedBuffer<float> logits_{MemoryKind::Activations};  // (B, T, V/TP); dlogits in place in backward
  AlignedBuffer<float> dres_{MemoryKind::Activations};    // (B, T, C) residual-stream gradient (rank's rows)
  // Sequence parallelism only: ln_f's output gathered (B, T, C), then in
  // backward the output layer's whole-row input gradient before its reduce-scatter.
  AlignedBuffer<float> lnf_all_{MemoryKind::Activations};
};

}  // namespace meshtrain
