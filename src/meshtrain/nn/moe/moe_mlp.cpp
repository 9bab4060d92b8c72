#include "meshtrain/nn/moe/moe_mlp.hpp"

#include <algorithm>
#include <cstring>

#include "meshtrain/core/error.hpp"

namespace meshtrain::nn {

namespace {
int ranks_of(const ExpertParallelComm* ep) { return ep ? ep->size() : 1; }
}  // namespace

MoeMlp::MoeMlp(ParamStore& store, const std::string& prefix, int64_t C, const MoeConfig& config,
               TensorParallelComm* tp, ExpertParallelComm* ep, RouterSums* sums)
    : store_(store),
      C_(C),
      E_(config.n_expert),
      k_(config.top_k),
      ep_(ep),
      sums_(sums),
      router_(store, prefix + ".router", C, config) {
  const int X = ranks_of(ep);
  if (E_ % X != 0)
    throw ConfigError("model.n_expert = " + std::to_string(E_) + " does not divide by the " + std::to_string(X) +
                      " expert-parallel ways (parallel.expert)");
  const int64_t local = E_ / X;
  first_expert_ = (ep ? ep->rank() : 0) * local;
  ExpertScope experts(store);
  for (int64_t e = first_expert_; e < first_expert_ + local; ++e)
    experts_.push_back(std::make_unique<Mlp>(store, prefix + ".experts." + std::to_string(e), C, tp));
  ran_.assign(size_t(local), 0);
}

void MoeMlp::init(Rng& rng, float stddev, float proj_stddev) {
  router_.init(rng, stddev);
  for (auto& expert : experts_) expert->init(rng, stddev, proj_stddev);
}

void MoeMlp::defer_weight_gradients(bool on) {
  for (auto& expert : experts_) expert->defer_weight_gradients(on);
}

void MoeMlp::backward_weight() {
  for (size_t e = 0; e < experts_.size(); ++e)
    if (ran_[e]) experts_[e]->backward_weight();
}

void MoeMlp::share_activations(SharedActivations&, const std::string&) {
  throw ConfigError("training.recompute = \"full\" does not cover mixture-of-experts blocks: replaying their "
                    "forward would route and exchange the tokens a second time; use \"selective\"");
}

// Rows of width C travel by all-to-all: `out_rows[d]` to rank d, taken
// from `send` in rank order, `in_rows[s]` from rank s into `recv`.
void MoeMlp::exchange(const float* send, const std::vector<size_t>& out_rows, float* recv,
                      const std::vector<size_t>& in_rows) {
  if (ranks_of(ep_) == 1) {
    std::copy(send, send + out_rows[0] * size_t(C_), recv);
    return;
  }
  std::vector<size_t> s(out_rows), r(in_rows);
  for (auto& n : s) n *= size_t(C_);
  for (auto& n : r) n *= size_t(C_);
  ep_->all_to_all_v(send, s, recv, r);
}

void MoeMlp::dispatch(const float* send, float* recv) { exchange(send, send_rows_, recv, recv_rows_); }
void MoeMlp::gather_back(const float* send, float* recv) { exchange(send, recv_rows_, recv, send_rows_); }

// Receive order (source rank, expert, token) <-> expert order (expert,
// source rank, token): the same walk, copying one way or the other.
void MoeMlp::reorder(const float* from, float* to, bool to_expert_order) const {
  const size_t X = recv_rows_.size(), local = experts_.size(), C = size_t(C_);
  std::vector<size_t> offset(local, 0);  // where each expert's rows start in expert order
  for (size_t e = 1; e < local; ++e) offset[e] = offset[e - 1] + size_t(expert_rows_[e - 1]);
  size_t at = 0;
  for (size_t s = 0; s < X; ++s)
    for (size_t e = 0; e < local; ++e) {
      const size_t rows = size_t(recv_counts_[s * local + e]);
      if (to_expert_order)
        std::memcpy(to + offset[e] * C, from + at * C, rows * C * sizeof(float));
      else
        std::memcpy(to + at * C, from + offset[e] * C, rows * C * sizeof(float));
      offset[e] += rows;
      at += rows;
    }
}

// The router's kept (token, choice) pairs in send order (by expert, then
// token), the rows to and from each rank, and each local expert's rows.
// Returns the rows this rank receives.
size_t MoeMlp::plan_routes(int64_t N) {
  const int X = ranks_of(ep_);
  const size_t local = experts_.size();
  const int32_t* choice = router_.choices();
  const uint8_t* kept = router_.kept();
  std::vector<int64_t> per_expert(size_t(E_), 0);
  for (int64_t i = 0; i < N * k_; ++i)
    if (kept[i]) ++per_expert[size_t(choice[i])];
  std::vector<int64_t> start(size_t(E_) + 1, 0);
  for (int64_t e = 0; e < E_; ++e) start[size_t(e) + 1] = start[size_t(e)] + per_expert[size_t(e)];
  send_pair_.assign(size_t(start.back()), 0);
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < N * k_; ++i)
    if (kept[i]) send_pair_[size_t(next[size_t(choice[i])]++)] = i;

  // Rows per rank and, to each rank, per expert of its; then what arrives.
  send_rows_.assign(size_t(X), 0);
  for (int64_t e = 0; e < E_; ++e) send_rows_[size_t(e) / local] += size_t(per_expert[size_t(e)]);
  recv_counts_.assign(size_t(X) * local, 0);
  if (X == 1)
    recv_counts_.assign(per_expert.begin(), per_expert.end());
  else
    ep_->all_to_all(per_expert.data(), recv_counts_.data(), local);
  recv_rows_.assign(size_t(X), 0);
  expert_rows_.assign(local, 0);
  for (size_t s = 0; s < size_t(X); ++s)
    for (size_t e = 0; e < local; ++e) {
      recv_rows_[s] += size_t(recv_counts_[s * local + e]);
      expert_rows_[e] += recv_counts_[s * local + e];
    }
  size_t received = 0;
  for (size_t rows : recv_rows_) received += rows;
  return received;
}

// Each expert on its rows of expert_in_, into expert_out_, in the layer's
// shared buffers (expert_in_, expert_h_ and expert_gelu_ stay alive for
// backward).
void MoeMlp::run_experts(size_t received) {
  const size_t C = size_t(C_), H = size_t(experts_.front()->hidden_features());
  expert_h_.ensure(std::max<size_t>(received, 1) * H);
  expert_gelu_.ensure(std::max<size_t>(received, 1) * H);
  size_t offset = 0;
  for (size_t e = 0; e < experts_.size(); ++e) {
    const int64_t rows = expert_rows_[e];
    ran_[e] = rows > 0;
    if (rows > 0)
      experts_[e]->forward_into(expert_in_.kernel() + offset * C, rows, expert_h_.raw() + offset * H,
                                expert_gelu_.raw() + offset * H, expert_out_.kernel() + offset * C);
    offset += size_t(rows);
  }
}

// out (N, C) = residual + each kept choice's gate times its expert's
// output (returned_, send order), in out_ on the host, then uploaded.
float* MoeMlp::combine(const float* residual) {
  const int64_t N = N_, C = C_, k = k_;
  out_.ensure(store_.device_memory(), size_t(N * C));
  float* out = out_.host();
  if (residual)
    std::memcpy(out, host_copy(store_, residual, size_t(N * C), host_in_), size_t(N * C) * sizeof(float));
  else
    std::fill(out, out + N * C, 0.0f);
  const float* gates = router_.gates();
  for (size_t i = 0; i < send_pair_.size(); ++i) {
    const int64_t pair = send_pair_[i];
    const float g = gates[pair];
    float* o = out + (pair / k) * C;
    const float* y = returned_.data() + i * size_t(C);
    for (int64_t c = 0; c < C; ++c) o[c] += g * y[c];
  }
  out_.upload(0, size_t(N * C));
  return out_.kernel();
}

float* MoeMlp::forward(const float* inp, int64_t B, int64_t T, const float* residual) {
  const int64_t N = B * T, C = C_, k = k_;
  N_ = N;
  router_.forward(inp, B, T, sums_);
  const float* x = host_copy(store_, inp, size_t(N * C), host_in_);
  const size_t received = plan_routes(N);

  // Tokens to their experts.
  DeviceAllocator* device = store_.device_memory();
  const size_t sent = send_pair_.size(), rows_in = received * size_t(C);
  send_.ensure(std::max<size_t>(sent, 1) * size_t(C));
  for (size_t i = 0; i < sent; ++i)
    std::memcpy(send_.data() + i * size_t(C), x + (send_pair_[i] / k) * C, size_t(C) * sizeof(float));
  recv_.ensure(std::max<size_t>(received, 1) * size_t(C));
  expert_in_.ensure(device, std::max<size_t>(received, 1) * size_t(C));
  expert_out_.ensure(device, std::max<size_t>(received, 1) * size_t(C));
  dispatch(send_.data(), recv_.data());
  reorder(recv_.data(), expert_in_.host(), true);
  expert_in_.upload(0, rows_in);

  run_experts(received);

  // Outputs back, and combined with the gates.
  expert_out_.download(0, rows_in);
  reorder(expert_out_.host(), recv_.data(), false);
  returned_.ensure(std::max<size_t>(sent, 1) * size_t(C));
  gather_back(recv_.data(), returned_.data());
  return combine(residual);
}

void MoeMlp::backward(float* dinp, const float* dout, Workspace& ws) {
  if (N_ == 0) throw Error("MoeMlp::backward called before forward");
  const int64_t N = N_, C = C_, k = k_;
  const size_t local = experts_.size(), sent = send_pair_.size();
  size_t received = 0;
  for (size_t rows : recv_rows_) received += rows;
  const size_t rows_in = received * size_t(C);
  const float* dout_host = host_copy(store_, dout, size_t(N * C), host_in_);
  // d gate = dout . y; d y = gate dout, in send order.
  std::vector<float> dgates(size_t(N * k), 0.0f);
  const float* gates = router_.gates();
  for (size_t i = 0; i < sent; ++i) {
    const int64_t pair = send_pair_[i];
    const float* d = dout_host + (pair / k) * C;
    const float* y = returned_.data() + i * size_t(C);
    float* dy = send_.data() + i * size_t(C);
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) {
      dot += double(d[c]) * y[c];
      dy[c] = gates[pair] * d[c];
    }
    dgates[size_t(pair)] = float(dot);
  }
  dispatch(send_.data(), recv_.data());
  StagedBuffer& dy_by_expert = expert_out_;  // the outputs are no longer needed
  reorder(recv_.data(), dy_by_expert.host(), true);
  dy_by_expert.upload(0, rows_in);
  expert_dx_.ensure(store_.device_memory(), std::max<size_t>(received, 1) * size_t(C));
  size_t offset = 0;
  for (size_t e = 0; e < local; ++e) {
    const int64_t rows = expert_rows_[e];
    if (rows > 0)
      experts_[e]->backward(expert_dx_.kernel() + offset * size_t(C), dy_by_expert.kernel() + offset * size_t(C), ws);
    else
      experts_[e]->announce_gradients();  // no token this micro-batch: nothing more will come
    offset += size_t(rows);
  }
  expert_dx_.download(0, rows_in);
  reorder(expert_dx_.host(), recv_.data(), false);
  gather_back(recv_.data(), send_.data());
  float* dinp_host = host_target(store_, dinp, size_t(N * C), host_dx_);
  std::fill(dinp_host, dinp_host + N * C, 0.0f);
  for (size_t i = 0; i < sent; ++i) {
    float* dx = dinp_host + (send_pair_[i] / k) * C;
    const float* part = send_.data() + i * size_t(C);
    for (int64_t c = 0; c < C; ++c) dx[c] += part[c];
  }
  put_back(store_, dinp, dinp_host, size_t(N * C));
  router_.backward(dgates.data(), dinp);
}

}  // namespace meshtrain::nn
