#include "meshtrain/nn/gpt.hpp"

#include <cmath>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/bf16.hpp"
#include "meshtrain/kernels/gemm.hpp"
#include "meshtrain/kernels/gemm_bf16.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/init.hpp"
#include "meshtrain/nn/moe/moe_mlp.hpp"

namespace meshtrain {

using kernels::Trans;
using nn::backend_of;
using nn::round_into;

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
  const nn::MoeConfig& m = c.moe;
  if (m.n_expert < 1) throw ConfigError("gpt: model.n_expert must be at least 1 (1: dense MLPs)");
  if (m.enabled()) {
    if (m.top_k < 1 || m.top_k > m.n_expert)
      throw ConfigError("gpt: model.top_k = " + std::to_string(m.top_k) + " must be between 1 and model.n_expert = " +
                        std::to_string(m.n_expert));
    if (m.moe_every < 1) throw ConfigError("gpt: model.moe_every must be at least 1");
    if (m.capacity_factor < 0 || m.aux_loss_coef < 0 || m.z_loss_coef < 0 || m.expert_bias_rate < 0)
      throw ConfigError("gpt: model.capacity_factor, aux_loss_coef, z_loss_coef and expert_bias_rate must not be "
                        "negative");
    if (nn::sequence_parallel(tp))
      throw ConfigError("gpt: a mixture of experts routes whole tokens, not sequence-parallel rows: set "
                        "parallel.sequence_parallel = false");
  }
  return c;
}

std::vector<GptPiece> whole_model_piece(const GptConfig& c) {
  return {GptPiece{.first_layer = 0, .end_layer = c.n_layer, .embedding = true, .head = true}};
}

void check_pieces(const std::vector<GptPiece>& pieces, int64_t n_layer) {
  if (pieces.empty()) throw Error("gpt: a model needs at least one piece");
  for (const GptPiece& p : pieces) {
    const bool empty = p.first_layer == p.end_layer && !p.embedding && !p.head;
    if (p.first_layer < 0 || p.end_layer < p.first_layer || p.end_layer > n_layer || empty)
      throw Error("gpt: a pipeline piece holds layers [" + std::to_string(p.first_layer) + ", " +
                  std::to_string(p.end_layer) + ") of " + std::to_string(n_layer) +
                  (empty ? " and nothing else" : ", which is outside the model"));
  }
}
}  // namespace

Gpt::Gpt(const GptConfig& config, nn::TensorParallelComm* tp) : Gpt(config, tp, whole_model_piece(config)) {}

Gpt::Gpt(const GptConfig& config, nn::TensorParallelComm* tp, std::vector<GptPiece> pieces,
         nn::ExpertParallelComm* ep)
    : Model(config.device),
      config_(checked(config, tp)),
      tp_(tp),
      ep_(ep),
      ws_{nn::memory_of(store_)},
      recomputed_(nn::memory_of(store_)) {
  check_pieces(pieces, config_.n_layer);
  store_.set_compute_precision(config_.precision);  // first: the blocks choose what they keep by it
  const bool balancing = config_.moe.aux_loss_coef > 0;
  for (const GptPiece& piece : pieces)
    for (int64_t i = piece.first_layer; i < piece.end_layer; ++i)
      if (config_.moe.is_moe_layer(i))
        moe_layers_.push_back({.layer = i,
                               .sums = std::make_unique<nn::RouterSums>(config_.moe.n_expert, config_.n_embd, balancing),
                               .router = nullptr});
  // Slot 0 of every piece declares the tensors, in the pieces' order (for the
  // whole model GPT2Model's: wte, wpe, h.0 ... h.{L-1}, ln_f). A pipeline
  // stage's wte is a unit of its own, so ZeRO slices the first and the last
  // stage's copies alike and their gradients' shards can be summed.
  split_wte_unit_ = !(pieces.size() == 1 && pieces[0].embedding && pieces[0].head);
  bool has_embedding = false, has_head = false;
  for (const GptPiece& piece : pieces) {
    PieceState state{.piece = piece, .slots = {}};
    state.slots.push_back(make_slot(piece));
    if (piece.embedding) {
      has_embedding = true;
      head_wte_ = state.slots[0]->embed->wte_index();
    }
    has_head = has_head || piece.head;
    pieces_.push_back(std::move(state));
  }
  // The tied output layer on a last stage without the embedding: a copy of
  // wte of its own.
  if (has_head && !has_embedding) {
    const Shape shape{config_.vocab_size, config_.n_embd};
    store_.close_whole_step_unit();
    head_wte_ = tp_ ? store_.declare("wte.weight", shape, true, Placement::sharded(0, tp_->size(), tp_->rank()))
                    : store_.declare("wte.weight", shape, true);
    store_.close_whole_step_unit();
  }
  if (has_head || has_embedding) vocab_rows_ = store_.view(head_wte_).shape[0];
  store_.allocate();
}

std::unique_ptr<Gpt::Slot> Gpt::make_slot(const GptPiece& piece) {
  const GptConfig& c = config_;
  auto s = std::make_unique<Slot>(nn::memory_of(store_));
  if (piece.embedding)
    s->embed = std::make_unique<nn::Embedding>(store_, "wte.weight", "wpe.weight", c.vocab_size, c.block_size,
                                               c.n_embd, tp_, split_wte_unit_);
  for (int64_t i = piece.first_layer; i < piece.end_layer; ++i) {
    nn::FeedForwardFactory moe;
    GptMoeLayer* layer = nullptr;
    for (GptMoeLayer& l : moe_layers_)
      if (l.layer == i) layer = &l;
    if (layer)
      moe = [&](ParamStore& store, const std::string& prefix) {
        auto ffn = std::make_unique<nn::MoeMlp>(store, prefix, c.n_embd, c.moe, tp_, ep_, layer->sums.get());
        if (!layer->router) layer->router = &ffn->router();
        return ffn;
      };
    s->blocks.push_back(
        std::make_unique<nn::Block>(store_, "h." + std::to_string(i), c.n_embd, c.n_head,
                                     nn::AttentionOptions(true, kernels::resolve_attention(c.attention, c.block_size)),
                                     tp_, moe));
    s->blocks.back()->set_recompute(c.recompute, recomputed_);
    if (c.precision == Precision::Bf16) s->blocks.back()->keep_bf16_activations(recomputed_);
  }
  if (piece.head) {
    s->ln_f = std::make_unique<nn::LayerNorm>(store_, "ln_f", c.n_embd, tp_);
    s->xent = std::make_unique<nn::VocabParallelCrossEntropy>(backend_of(store_), tp_, c.vocab_size);
  }
  return s;
}

Gpt::Slot& Gpt::slot(size_t piece, size_t index) {
  if (piece >= pieces_.size())
    throw Error("gpt: piece " + std::to_string(piece) + " of " + std::to_string(pieces_.size()));
  auto& slots = pieces_[piece].slots;
  // New slots are replicas of slot 0's layers: they bind its tensors.
  if (index >= slots.size()) {
    ReplicaScope replica(store_);
    while (slots.size() <= index) slots.push_back(make_slot(pieces_[piece].piece));
  }
  return *slots[index];
}

bool Gpt::whole_model() const {
  const GptPiece& p = pieces_[0].piece;
  return pieces_.size() == 1 && p.embedding && p.head && p.first_layer == 0 && p.end_layer == config_.n_layer;
}

void Gpt::draw_parameters(Rng& rng) {
  const float stddev = 0.02f;
  const float proj_stddev = 0.02f / std::sqrt(2.0f * config_.n_layer);
  bool embedding = false;
  for (auto& state : pieces_) {
    Slot& s = *state.slots[0];
    if (s.embed) {
      s.embed->init(rng, stddev);
      embedding = true;
    }
    for (auto& block : s.blocks) block->init(rng, stddev, proj_stddev);
    if (s.ln_f) s.ln_f->init();
  }
  // The tied copy draws wte's own values (its stream follows its name).
  if (!embedding && vocab_rows_ > 0) nn::fill_normal(store_, head_wte_, rng, stddev);
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

int64_t Gpt::activation_floats(int64_t B, int64_t T) const { return local_rows(B, T) * config_.n_embd; }

const float* Gpt::run_layers(Slot& s, const GptPiece& piece, const int32_t* tokens, int64_t B, int64_t T) {
  const int64_t rows = local_rows(B, T);
  const float* x = piece.embedding ? s.embed->forward(tokens, B, T) : s.input.raw();  // (B, T, C), this rank's rows
  for (auto& block : s.blocks) x = block->forward(x, B, T);
  return s.ln_f ? s.ln_f->forward(x, rows) : x;
}

ForwardResult Gpt::head_forward(Slot& s, const int32_t* targets) {
  const int64_t B = s.B, T = s.T, C = config_.n_embd, V = vocab_rows_;
  if (nn::sequence_parallel(tp_)) {
    s.lnf_all.ensure(B * T * C);
    tp_->all_gather(s.lnf, s.lnf_all.raw(), static_cast<size_t>(local_rows(B, T) * C));  // -> (B*T, C)
    s.lnf = s.lnf_all.raw();
  }
  s.fused_gradient = false;
  if (store_.bf16_products() && s.xent->serial()) return fused_head_forward(s, targets);
  s.logits.ensure(B * T * V);
  output_layer(s, s.lnf, B * T);
  return s.xent->forward(s.logits.raw(), targets, B * T);
}

ForwardResult Gpt::fused_head_forward(Slot& s, const int32_t* targets) {
  const int64_t N = s.B * s.T, C = config_.n_embd, V = vocab_rows_;
  nn::SoftmaxCrossEntropy& xent = *s.xent->serial();
  kernels::Backend& backend = backend_of(store_);
  xent.begin(targets, N, V);
  const Bf16* lnf16 = round_into(store_, s.lnf, size_t(N * C), s.lnf16);
  const Bf16* wte16 = round_into(store_, store_.param(head_wte_), size_t(V * C), s.wte16);
  s.logits.ensure(std::min(N, kClassifierRows) * V);
  s.dlogits16.ensure(N * V);
  for (int64_t r0 = 0; r0 < N; r0 += kClassifierRows) {
    const int64_t rows = std::min(kClassifierRows, N - r0);
    backend.gemm_bf16(Trans::No, Trans::Yes, int(rows), int(V), int(C), 1.0f, lnf16 + r0 * C, int(C), wte16, int(C),
                      0.0f, s.logits.raw(), int(V));
    xent.rows(s.logits.raw(), r0, rows);
    backend.to_bf16(s.logits.raw(), s.dlogits16.raw() + r0 * V, size_t(rows * V));
  }
  s.fused_gradient = true;
  return xent.finish();
}

void Gpt::output_layer(Slot& s, const float* lnf, int64_t rows) {
  // logits (rows, V) = ln_f (rows, C) wte^T (C, V), V: this rank's vocabulary rows
  const int64_t C = config_.n_embd, V = vocab_rows_;
  const int n = static_cast<int>(rows), v = static_cast<int>(V), c = static_cast<int>(C);
  if (store_.bf16_products()) {  // both operands rounded once, kept for backward
    backend_of(store_).gemm_bf16(
        Trans::No, Trans::Yes, n, v, c, 1.0f, round_into(store_, lnf, size_t(rows * C), s.lnf16), c,
        round_into(store_, store_.param(head_wte_), size_t(V * C), s.wte16), c, 0.0f, s.logits.raw(), v);
  } else {
    backend_of(store_).gemm(Trans::No, Trans::Yes, n, v, c, 1.0f, lnf, c, store_.param(head_wte_), c, 0.0f,
                            s.logits.raw(), v);
  }
}

void Gpt::head_backward(Slot& s, bool split) {
  const int64_t N = s.B * s.T, C = config_.n_embd, V = vocab_rows_, rows = local_rows(s.B, s.T);
  const bool seq = nn::sequence_parallel(tp_);
  const int n = static_cast<int>(N), c = static_cast<int>(C), v = static_cast<int>(V);
  float* dlogits = s.logits.raw();  // in place
  if (!s.fused_gradient) {
    s.xent->backward(dlogits);
    // bf16: rounded once for both products (and a split backward's later weight half).
    if (store_.bf16_products()) round_into(store_, dlogits, static_cast<size_t>(N * V), s.dlogits16);
  }
  float* dlnf = nn::Workspace::get(ws_.dln, rows * C);  // (B, T, C), this rank's rows
  // Under sequence parallelism the whole-row dlnf goes over the gathered
  // ln_f output, which the dwte GEMM reads first.
  float* dlnf_all = seq ? s.lnf_all.raw() : dlnf;  // (B*T, C)
  if (!split) head_backward_weight(s);
  // Tied output layer: dlnf = dlogits wte.
  if (store_.bf16_products())
    backend_of(store_).gemm_bf16(Trans::No, Trans::No, n, c, v, 1.0f, s.dlogits16.raw(), v, s.wte16.raw(), c, 0.0f,
                                 dlnf_all, c);
  else
    backend_of(store_).gemm(Trans::No, Trans::No, n, c, v, 1.0f, dlogits, v, store_.param(head_wte_), c, 0.0f, dlnf_all,
                            c);
  // Each rank's dlnf covers its vocabulary columns only.
  if (seq)
    tp_->reduce_scatter_sum(dlnf_all, dlnf, static_cast<size_t>(rows * C));  // -> (B*T/TP, C)
  else if (tp_)
    tp_->all_reduce_sum(dlnf, static_cast<size_t>(N * C));
  s.ln_f->backward(s.dres.raw(), dlnf);
}

void Gpt::head_backward_weight(Slot& s) {
  const int n = static_cast<int>(s.B * s.T), c = static_cast<int>(config_.n_embd), v = static_cast<int>(vocab_rows_);
  // dwte (V, C) += dlogits^T (V, N) lnf (N, C)
  if (store_.bf16_products())
    backend_of(store_).gemm_bf16(Trans::Yes, Trans::No, v, c, n, 1.0f, s.dlogits16.raw(), v, s.lnf16.raw(), c, 1.0f,
                                 store_.grad(head_wte_), c);
  else
    backend_of(store_).gemm(Trans::Yes, Trans::No, v, c, n, 1.0f, s.logits.raw(), v, s.lnf, c, 1.0f,
                            store_.grad(head_wte_), c);
}

float* Gpt::input_buffer(size_t piece, size_t index, int64_t B, int64_t T) {
  Slot& s = slot(piece, index);
  s.input.ensure(activation_floats(B, T));
  return s.input.raw();
}

float* Gpt::output_gradient_buffer(size_t piece, size_t index, int64_t B, int64_t T) {
  Slot& s = slot(piece, index);
  s.dres.ensure(activation_floats(B, T));
  return s.dres.raw();
}

const float* Gpt::forward_piece(size_t piece, size_t index, const Batch& batch, ForwardResult* loss) {
  const int64_t B = batch.batch_size, T = batch.seq_len;
  if (B <= 0 || T <= 0 || T > config_.block_size)
    throw Error("gpt: batch (" + std::to_string(B) + ", " + std::to_string(T) + ") needs B > 0 and 0 < T <= " +
                std::to_string(config_.block_size));
  const GptPiece& p = pieces_.at(piece).piece;
  if ((p.embedding && batch.tokens.size() < static_cast<size_t>(B * T)) ||
      (p.head && batch.targets.size() < static_cast<size_t>(B * T)))
    throw Error("gpt: batch holds fewer than B*T = " + std::to_string(B * T) + " tokens or targets");
  Slot& s = slot(piece, index);
  if (!p.embedding && s.input.size() < static_cast<size_t>(activation_floats(B, T)))
    throw Error("gpt: piece " + std::to_string(piece) + " runs forward before its input arrived");
  s.B = B;
  s.T = T;
  const float* x = run_layers(s, p, batch.tokens.data(), B, T);
  s.forwarded = true;
  if (!p.head) return x;
  s.lnf = x;
  *loss = head_forward(s, batch.targets.data());
  return nullptr;
}

const float* Gpt::backward_piece(size_t piece, size_t index, bool split) {
  Slot& s = slot(piece, index);
  if (!s.forwarded) throw Error("gpt: backward() called before forward()");
  const GptPiece& p = pieces_[piece].piece;
  s.dres.ensure(local_rows(s.B, s.T) * config_.n_embd);
  float* dres = s.dres.raw();  // (B, T, C) residual-stream gradient, this rank's rows
  if (p.head) head_backward(s, split);  // else the next stage's gradient is in dres already
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) {
    (*it)->defer_weight_gradients(split);
    (*it)->backward(dres, ws_);
  }
  if (s.embed) s.embed->backward(dres);
  // A second backward without forward would read dlogits as logits.
  s.forwarded = false;
  s.weights_pending = split;
  return s.embed ? nullptr : dres;
}

void Gpt::backward_piece_weights(size_t piece, size_t index) {
  Slot& s = slot(piece, index);
  if (!s.weights_pending) throw Error("gpt: backward_piece_weights without a split backward before it");
  s.weights_pending = false;
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) (*it)->backward_weight();
  if (s.ln_f) head_backward_weight(s);
}

ForwardResult Gpt::forward(const Batch& batch) {
  if (!whole_model()) throw Error("gpt: forward() runs the whole model; this one holds pipeline pieces");
  ForwardResult loss;
  forward_piece(0, 0, batch, &loss);
  return loss;
}

void Gpt::backward() {
  if (!whole_model()) throw Error("gpt: backward() runs the whole model; this one holds pipeline pieces");
  backward_piece(0, 0, false);
}

std::span<const float> Gpt::last_logits(std::span<const int32_t> tokens) {
  return logits_from(tokens, static_cast<int64_t>(tokens.size()) - 1);
}

std::span<const float> Gpt::sequence_logits(std::span<const int32_t> tokens) { return logits_from(tokens, 0); }

std::span<const float> Gpt::logits_from(std::span<const int32_t> tokens, int64_t first) {
  const int64_t T = static_cast<int64_t>(tokens.size()), C = config_.n_embd, V = vocab_rows_;
  if (tp_ && tp_->size() > 1)
    throw Error("gpt: generation runs in one process, but this model is split over " +
                std::to_string(tp_->size()) + " tensor-parallel ranks; consolidate the checkpoint " +
                "(meshtrain consolidate) and generate from one process");
  if (!whole_model()) throw Error("gpt: generation needs the whole model, not pipeline pieces");
  if (T <= 0 || T > config_.block_size)
    throw Error("gpt: logits need 1 to " + std::to_string(config_.block_size) + " tokens, got " +
                std::to_string(T));
  Slot& s = slot(0, 0);
  const float* lnf = run_layers(s, pieces_[0].piece, tokens.data(), 1, T);
  s.forwarded = false;  // saved activations now belong to this sequence, not a training batch
  const int64_t rows = T - first;
  s.logits.ensure(rows * V);
  output_layer(s, lnf + first * C, rows);  // in the training's precision
  const size_t n = static_cast<size_t>(rows * V);
  if (store_.on_host()) return {s.logits.raw(), n};
  logits_host_.resize(n);
  s.logits.download(logits_host_);
  return logits_host_;
}

double Gpt::flops_per_sample() const {
  const double L = config_.n_layer, C = config_.n_embd, V = config_.vocab_size, T = config_.block_size;
  double n_matmul = L * 12.0 * C * C + V * C;
  const nn::MoeConfig& m = config_.moe;
  for (int64_t i = 0; i < config_.n_layer; ++i)
    if (m.is_moe_layer(i)) n_matmul += (double(m.top_k) - 1.0) * 8.0 * C * C + C * double(m.n_expert);
  return 6.0 * n_matmul + 12.0 * L * C * T;
}

}  // namespace meshtrain
