#include "meshtrain/nn/moe/moe_mlp.hpp"

#include <algorithm>

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
// from `send` in rank order, `in_rows[s]` from rank s into `recv`; with
// no peers, a copy where the rows are.
void MoeMlp::exchange(const float* send, const std::vector<size_t>& out_rows, float* recv,
                      const std::vector<size_t>& in_rows) {
  if (ranks_of(ep_) == 1) {
    backend_of(store_).copy(recv, send, out_rows[0] * size_t(C_));
    return;
  }
  std::vector<size_t> s(out_rows), r(in_rows);
  for (auto& n : s) n *= size_t(C_);
  for (auto& n : r) n *= size_t(C_);
  ep_->all_to_all_v(send, s, recv, r);
}

void MoeMlp::dispatch(const float* send, float* recv) { exchange(send, send_rows_, recv, recv_rows_); }
void MoeMlp::gather_back(const float* send, float* recv) { exchange(send, recv_rows_, recv, send_rows_); }

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

// The routes the kernels follow (moe_mlp.hpp lists them), built from the
// plan on the host and uploaded in one copy, with each send row's gate.
void MoeMlp::upload_routes(size_t received) {
  const size_t sent = send_pair_.size(), N = size_t(N_), local = experts_.size();
  const size_t sizes[kRouteParts] = {sent, received, received, N + 1, sent};
  for (size_t p = 0; p < kRouteParts; ++p) route_begin_[p + 1] = route_begin_[p] + sizes[p];
  routes_host_.assign(route_begin_[kRouteParts], 0);
  int32_t* send_token = routes_host_.data() + route_begin_[kSendToken];
  int32_t* to_expert = routes_host_.data() + route_begin_[kToExpert];
  int32_t* to_receive = routes_host_.data() + route_begin_[kToReceive];
  int32_t* token_start = routes_host_.data() + route_begin_[kTokenStart];
  int32_t* token_rows = routes_host_.data() + route_begin_[kTokenRows];
  send_gates_host_.resize(std::max<size_t>(sent, 1));
  const float* gates = router_.gates();
  for (size_t i = 0; i < sent; ++i) {
    send_token[i] = int32_t(send_pair_[i] / k_);
    send_gates_host_[i] = gates[send_pair_[i]];
    ++token_start[send_token[i] + 1];
  }
  // Receive order (source rank, expert, token) <-> expert order (expert,
  // source rank, token).
  std::vector<size_t> expert_at(local, 0);
  for (size_t e = 1; e < local; ++e) expert_at[e] = expert_at[e - 1] + size_t(expert_rows_[e - 1]);
  size_t at = 0;
  for (size_t s = 0; s < recv_rows_.size(); ++s)
    for (size_t e = 0; e < local; ++e)
      for (int64_t r = 0; r < recv_counts_[s * local + e]; ++r, ++at) {
        to_expert[expert_at[e]] = int32_t(at);
        to_receive[at] = int32_t(expert_at[e]++);
      }
  // Each token's send rows, in send order (the order their outputs are added in).
  for (size_t t = 0; t < N; ++t) token_start[t + 1] += token_start[t];
  std::vector<int32_t> next(token_start, token_start + N);
  for (size_t i = 0; i < sent; ++i) token_rows[next[size_t(send_token[i])]++] = int32_t(i);
  kernels::Backend& backend = backend_of(store_);
  routes_at_ = staged_input(backend, routes_host_.data(), routes_host_.size(), routes_);
  send_gates_at_ = staged_input(backend, send_gates_host_.data(), send_gates_host_.size(), send_gates_);
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
      experts_[e]->forward_into(expert_in_.raw() + offset * C, rows, expert_h_.raw() + offset * H,
                                expert_gelu_.raw() + offset * H, expert_out_.raw() + offset * C);
    offset += size_t(rows);
  }
}

// Tokens to their experts and back: out (N, C) = residual + each kept
// choice's gate times its expert's output, added in send order.
float* MoeMlp::forward(const float* inp, int64_t B, int64_t T, const float* residual) {
  const int64_t N = B * T, C = C_;
  N_ = N;
  router_.forward(inp, B, T, sums_);
  const size_t received = plan_routes(N);
  upload_routes(received);
  kernels::Backend& backend = backend_of(store_);
  const size_t sent = send_pair_.size(), width = size_t(C);
  for (DeviceArray<float>* rows : {&send_, &returned_}) rows->ensure(std::max<size_t>(sent, 1) * width);
  for (DeviceArray<float>* rows : {&recv_, &expert_in_, &expert_out_})
    rows->ensure(std::max<size_t>(received, 1) * width);
  backend.gather_rows(send_.raw(), inp, route(kSendToken), int64_t(sent), C);
  dispatch(send_.raw(), recv_.raw());
  backend.gather_rows(expert_in_.raw(), recv_.raw(), route(kToExpert), int64_t(received), C);

  run_experts(received);

  backend.gather_rows(recv_.raw(), expert_out_.raw(), route(kToReceive), int64_t(received), C);
  gather_back(recv_.raw(), returned_.raw());
  out_.ensure(size_t(N * C));
  backend.combine_rows(out_.raw(), residual, returned_.raw(), route(kTokenStart), route(kTokenRows), send_gates_at_, N,
                       C);
  return out_.raw();
}

// d gate = dout . y and d y = gate dout per send row; the d y go to the
// experts and their input gradients come back, summed per token.
void MoeMlp::backward(float* dinp, const float* dout, Workspace& ws) {
  if (N_ == 0) throw Error("MoeMlp::backward called before forward");
  const int64_t N = N_, C = C_;
  const size_t local = experts_.size(), sent = send_pair_.size(), width = size_t(C);
  size_t received = 0;
  for (size_t rows : recv_rows_) received += rows;
  kernels::Backend& backend = backend_of(store_);
  dgates_.ensure(std::max<size_t>(sent, 1));
  backend.gate_backward_rows(send_.raw(), dgates_.raw(), dout, returned_.raw(), route(kSendToken), send_gates_at_,
                             int64_t(sent), C);
  dispatch(send_.raw(), recv_.raw());
  DeviceArray<float>& dy_by_expert = expert_out_;  // the outputs are no longer needed
  backend.gather_rows(dy_by_expert.raw(), recv_.raw(), route(kToExpert), int64_t(received), C);
  expert_dx_.ensure(std::max<size_t>(received, 1) * width);
  size_t offset = 0;
  for (size_t e = 0; e < local; ++e) {
    const int64_t rows = expert_rows_[e];
    if (rows > 0)
      experts_[e]->backward(expert_dx_.raw() + offset * width, dy_by_expert.raw() + offset * width, ws);
    else
      experts_[e]->announce_gradients();  // no token this micro-batch: nothing more will come
    offset += size_t(rows);
  }
  backend.gather_rows(recv_.raw(), expert_dx_.raw(), route(kToReceive), int64_t(received), C);
  gather_back(recv_.raw(), send_.raw());
  backend.combine_rows(dinp, nullptr, send_.raw(), route(kTokenStart), route(kTokenRows), nullptr, N, C);
  // The gates' gradients to the host, where the router's backward runs.
  std::vector<float> by_row(sent), dgates(size_t(N * k_), 0.0f);
  dgates_.download(by_row);
  for (size_t i = 0; i < sent; ++i) dgates[size_t(send_pair_[i])] = by_row[i];
  router_.backward(dgates.data(), dinp);
}

}  // namespace meshtrain::nn
