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
//
// Pipeline parallelism: a Gpt may hold only some pieces of the model (a
// GptPiece each: consecutive blocks, the first also the embeddings, the
// last also ln_f, the tied output layer and the loss), one per virtual stage
// a pipeline rank runs. It declares only those pieces' tensors, under their
// global names; the last piece without the first declares its own wte (the
// tied copy), whose gradient the pipeline sums with the first stage's.
// Each piece runs micro-batches in activation slots (pipeline_model.hpp):
// slot k of a piece is a replica of its layers that shares the parameters
// (ReplicaScope, core/param_store.hpp) and owns one micro-batch's activations, made on
// first use, so a schedule that keeps k micro-batches in flight holds k
// slots' activations.
//
// Mixture of experts (model.moe.n_expert > 1): block i's MLP is a MoE layer
// when moe.is_moe_layer(i) (nn/moe/moe_mlp.hpp); with an expert-parallel
// group the rank declares its experts only. Not under sequence parallelism.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "meshtrain/core/device.hpp"
#include "meshtrain/core/device_array.hpp"
#include "meshtrain/nn/block.hpp"
#include "meshtrain/nn/embedding.hpp"
#include "meshtrain/nn/layernorm.hpp"
#include "meshtrain/nn/model.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"
#include "meshtrain/nn/moe/moe_config.hpp"
#include "meshtrain/nn/moe/router.hpp"
#include "meshtrain/nn/moe/router_sums.hpp"
#include "meshtrain/nn/pipeline_model.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/nn/recompute.hpp"
#include "meshtrain/nn/vocab_parallel_cross_entropy.hpp"
#include "meshtrain/nn/workspace.hpp"

namespace meshtrain {

struct GptConfig {
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t block_size = 128;  // longest sequence (rows of wpe)
  int64_t vocab_size = 256;  // bytes
  nn::MoeConfig moe{};       // n_expert = 1: dense MLPs
  nn::Recompute recompute = nn::Recompute::None;  // nn/recompute.hpp
  // The products' precision, set on the store; bf16 also keeps the blocks'
  // activations in bf16 (nn/recompute.hpp).
  Precision precision = Precision::Fp32;
  kernels::AttentionKernel attention = kernels::AttentionKernel::Auto;  // training.attention
  // Where the parameters, gradients and activations live (training.device):
  // the dense GPT on one device (docs/gpu.md).
  Device device{};
};

// One mixture-of-experts block this rank holds: its step's routing sums
// (shared by the block's activation slots) and its router.
struct GptMoeLayer {
  int64_t layer = 0;
  std::unique_ptr<nn::RouterSums> sums;
  nn::Router* router = nullptr;  // slot 0's (the replicas share its tensors)
};

// One virtual pipeline stage's share of the GPT.
struct GptPiece {
  int64_t first_layer = 0, end_layer = 0;  // blocks h.first_layer .. h.(end_layer-1)
  bool embedding = false;                  // wte and wpe: the first stage
  bool head = false;                       // ln_f, the tied output layer and the loss: the last stage
  bool operator==(const GptPiece&) const = default;
};

class Gpt final : public Model, public nn::PipelineModel {
 public:
  // Rows of logits the fused classifier holds at a time (fused_head_forward).
  static constexpr int64_t kClassifierRows = 256;

  // Declares and allocates every parameter (zeroed); call init_parameters() next.
  // Throws ConfigError on non-positive sizes, n_embd not divisible by n_head,
  // or, with a tensor-parallel group, n_head or vocab_size not divisible by
  // TP (the vocabulary is not padded: pick a multiple of TP).
  explicit Gpt(const GptConfig& config, nn::TensorParallelComm* tp = nullptr);
  // Only `pieces` (in the order this rank runs them: its virtual stages'
  // order); Error when a piece's layers are outside [0, n_layer) or empty
  // without the embedding or head.
  Gpt(const GptConfig& config, nn::TensorParallelComm* tp, std::vector<GptPiece> pieces,
      nn::ExpertParallelComm* ep = nullptr);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  std::string kind() const override { return "gpt"; }
  // GPT-2 init: weights ~ N(0, 0.02), the c_proj weights ~ N(0, 0.02 / sqrt(2 L)),
  // biases 0, layernorm weight 1 and bias 0. A piece draws exactly its
  // tensors' values of the whole model's init (nn/init.hpp).
  void draw_parameters(Rng& rng) override;
  // The whole model only (Error otherwise). Reads batch.tokens and
  // batch.targets (B, T) with T = batch.seq_len <= block_size.
  ForwardResult forward(const Batch& batch) override;
  void backward() override;
  // Per token: 6 * N_matmul + 12 * L * C * T with T = block_size, where
  // N_matmul = L * 12 C^2 (c_attn, c_proj, c_fc, c_proj weights) + V * C (tied
  // output layer): the PaLM/Chinchilla count (biases, norms, embedding lookups left out).
  // A MoE block counts its k active experts' MLPs (8 C^2 each) and its router (C E).
  double flops_per_sample() const override;

  // Pipeline pieces (pipeline_model.hpp).
  size_t pieces() const override { return pieces_.size(); }
  bool piece_has_embedding(size_t piece) const override { return pieces_[piece].piece.embedding; }
  bool piece_has_head(size_t piece) const override { return pieces_[piece].piece.head; }
  int64_t activation_floats(int64_t B, int64_t T) const override;  // this rank's rows x C
  float* input_buffer(size_t piece, size_t slot, int64_t B, int64_t T) override;
  float* output_gradient_buffer(size_t piece, size_t slot, int64_t B, int64_t T) override;
  const float* forward_piece(size_t piece, size_t slot, const Batch& batch, ForwardResult* loss) override;
  const float* backward_piece(size_t piece, size_t slot, bool split) override;
  void backward_piece_weights(size_t piece, size_t slot) override;
  size_t slots_made(size_t piece) const override { return pieces_[piece].slots.size(); }
  const GptPiece& piece(size_t index) const { return pieces_[index].piece; }
  // This rank's wte: the embedding's, else the output layer's tied copy.
  size_t head_wte_index() const { return head_wte_; }

  // Logits (V) of the last position of one sequence tokens (1, T), T in
  // [1, block_size], for generation (no KV cache). Clobbers what forward()
  // saved for backward(); the span lives until the next call. Generation is
  // one process and the whole model: throws Error under a tensor-parallel
  // group of more than one rank (each holds V/TP of the logits; consolidate
  // the checkpoint first) or on a pipeline piece.
  std::span<const float> last_logits(std::span<const int32_t> tokens);
  // Logits (T, V) of every position of one sequence, on the same terms
  // (what a user compares with another implementation's).
  std::span<const float> sequence_logits(std::span<const int32_t> tokens);

  const GptConfig& config() const { return config_; }
  // This rank's place in its expert-parallel group (0 of 1 without one).
  int expert_rank() const { return ep_ ? ep_->rank() : 0; }
  int expert_ways() const { return ep_ ? ep_->size() : 1; }
  // The mixture-of-experts blocks of this rank's pieces, in layer order.
  std::vector<GptMoeLayer>& moe_layers() { return moe_layers_; }

 private:
  // One micro-batch's layers of a piece: replicas sharing the parameters,
  // each with its own activations.
  struct Slot {
    DeviceAllocator& memory;  // the store's device's: where the activations below live
    std::unique_ptr<nn::Embedding> embed;  // the first stage's
    std::vector<std::unique_ptr<nn::Block>> blocks;
    std::unique_ptr<nn::LayerNorm> ln_f;  // the last stage's
    std::unique_ptr<nn::VocabParallelCrossEntropy> xent;
    int64_t B = 0, T = 0;
    const float* lnf = nullptr;                              // (B, T, C), owned by ln_f (or lnf_all)
    DeviceArray<float> input{memory, MemoryKind::Activations};     // (B, T, C) from the previous stage
    // (B, T, V/TP); dlogits in place in backward. The fused classifier's:
    // one block of kClassifierRows rows.
    DeviceArray<float> logits{memory, MemoryKind::Activations};
    DeviceArray<float> dres{memory, MemoryKind::Activations};      // (B, T, C) residual-stream gradient (rank's rows)
    // Sequence parallelism only: ln_f's output gathered (B, T, C), then in
    // backward the output layer's whole-row input gradient before its reduce-scatter.
    DeviceArray<float> lnf_all{memory, MemoryKind::Activations};
    // bf16 products only (ParamStore::compute_precision): the output layer's
    // rounded operands, wte (V/TP, C), ln_f's output (B*T, C) and dlogits (B*T, V/TP).
    DeviceArray<Bf16> wte16{memory, MemoryKind::WeightCopies};
    DeviceArray<Bf16> lnf16{memory, MemoryKind::Activations};
    DeviceArray<Bf16> dlogits16{memory, MemoryKind::Activations};
    bool forwarded = false;       // forward ran, backward not yet
    bool fused_gradient = false;  // the fused classifier left dlogits16 ready
    bool weights_pending = false;  // a split backward ran, backward_piece_weights not yet
  };
  struct PieceState {
    GptPiece piece;
    std::vector<std::unique_ptr<Slot>> slots;
  };

  // The layers of `piece` (declaring or, as a replica, binding their tensors).
  std::unique_ptr<Slot> make_slot(const GptPiece& piece);
  Slot& slot(size_t piece, size_t index);
  // Embedding (first stage) or `input`, blocks, and ln_f (last stage);
  // returns the last layer's output, under sequence parallelism this rank's
  // rows (B T / TP, C).
  const float* run_layers(Slot& s, const GptPiece& piece, const int32_t* tokens, int64_t B, int64_t T);
  // Logits of positions [first, T) of one sequence (last_logits, sequence_logits).
  std::span<const float> logits_from(std::span<const int32_t> tokens, int64_t first);
  // The tied output layer and the loss over ln_f's output.
  ForwardResult head_forward(Slot& s, const int32_t* targets);
  // s.logits (rows, V) from the final norm's rows: bf16 products under bf16
  // (their rounded operands kept in s for backward), else fp32.
  void output_layer(Slot& s, const float* lnf, int64_t rows);
  // The fused classifier (bf16 products, no vocabulary split): the output
  // layer and the loss kClassifierRows rows at a time, each block's logits
  // turned into their gradient at once and kept only rounded (dlogits16),
  // as llm.c's fused classifier does on GPUs: the (B T, V) fp32 logits
  // (823 MB for GPT-2 at batch 4, context 1024) never exist whole.
  ForwardResult fused_head_forward(Slot& s, const int32_t* targets);
  // dlogits -> dlnf -> s.dres (rows of this rank).
  void head_backward(Slot& s, bool split);
  void head_backward_weight(Slot& s);
  // The rows of B T this rank holds: all, or B T / TP under sequence
  // parallelism (Error naming B, T and TP when they do not divide).
  int64_t local_rows(int64_t B, int64_t T) const;
  bool whole_model() const;

  GptConfig config_;
  nn::TensorParallelComm* tp_;
  nn::ExpertParallelComm* ep_ = nullptr;
  std::vector<GptMoeLayer> moe_layers_;
  std::vector<PieceState> pieces_;
  size_t head_wte_ = 0;
  bool split_wte_unit_ = false;  // pipeline pieces: wte in a unit of its own
  int64_t vocab_rows_ = 0;  // this rank's wte rows (V/TP)
  nn::Workspace ws_;
  // Recomputation: the activations every block of every slot shares (one
  // block's backward runs at a time).
  nn::SharedActivations recomputed_;
  std::vector<float> logits_host_;  // logits_from's, downloaded from a device
};

}  // namespace meshtrain
