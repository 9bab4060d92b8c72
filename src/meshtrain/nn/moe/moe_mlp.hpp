#pragma once
// A mixture-of-experts feed-forward sublayer (Shazeer et al. 2017; GShard;
// Switch): a router (router.hpp) picks each token's top-k of E experts, each
// expert is a GPT-2 MLP (mlp.hpp), and the output is the residual plus the
// gate-weighted sum of the token's experts' outputs. Dropped choices add
// nothing.
//
// Tensors, under "<prefix>" (= "h.<i>.mlp"): "router.weight" (C, E) [and
// "router.expert_bias" (E)], and per expert e "experts.<e>.c_fc.*" and
// "experts.<e>.c_proj.*" with the dense MLP's shapes, marked expert
// (ParamView::expert). With a tensor-parallel group every expert is split
// as the dense MLP is; the router is replicated.
//
// Dispatch is one code path for any number of expert-parallel ranks X: the
// rank holds experts [r E/X, (r+1) E/X) and every token's chosen rows travel
// to the rank of their expert by all-to-all (variable sizes), ordered by
// expert and then token; the receiving rank runs each expert on its rows
// from every rank (source rank order, so expert e sees the global batch's
// tokens in their one-process order), and the outputs travel back the same
// way. Backward sends the output gradients the same way and the input
// gradients back. Without a group (or X = 1) the all-to-all is a copy.
//
// The rows stay where the layer's kernels run: the backend gathers them
// into travel order and back (kernels/routed_rows.hpp), the expert group
// exchanges them there (over NCCL on GPUs, parallel/expert/), and the
// backend sums the experts' outputs with their gates. Only the routing's
// bookkeeping runs on the host: the router's choices (router.hpp), the
// per-expert counts and the route indices made from them, uploaded once per
// forward (a few ints per token), and the gates' gradients downloaded in
// backward. The moves and the combine are the CPU's expressions on every
// device (routed_rows_math.hpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "meshtrain/core/device_array.hpp"
#include "meshtrain/core/param_store.hpp"
#include "meshtrain/nn/backend.hpp"
#include "meshtrain/nn/feed_forward.hpp"
#include "meshtrain/nn/mlp.hpp"
#include "meshtrain/nn/moe/expert_parallel.hpp"
#include "meshtrain/nn/moe/moe_config.hpp"
#include "meshtrain/nn/moe/router.hpp"
#include "meshtrain/nn/moe/router_sums.hpp"
#include "meshtrain/nn/tensor_parallel.hpp"

namespace meshtrain::nn {

class MoeMlp final : public FeedForward {
 public:
  // `sums` (shared by the layer's activation slots; may be null) receives
  // the routing statistics of every training forward. Throws ConfigError
  // when E does not divide by the expert-parallel ranks.
  MoeMlp(ParamStore& store, const std::string& prefix, int64_t C, const MoeConfig& config, TensorParallelComm* tp,
         ExpertParallelComm* ep, RouterSums* sums);

  void init(Rng& rng, float stddev, float proj_stddev) override;
  float* forward(const float* inp, int64_t B, int64_t T, const float* residual) override;
  void backward(float* dinp, const float* dout, Workspace& ws) override;
  void defer_weight_gradients(bool on) override;
  void backward_weight() override;
  // Refused: replaying the forward would route the tokens and exchange them
  // with the expert group a second time.
  void share_activations(SharedActivations&, const std::string&) override;

  Router& router() { return router_; }
  int64_t first_expert() const { return first_expert_; }
  int64_t local_experts() const { return static_cast<int64_t>(experts_.size()); }

 private:
  // Rows in send order <-> rows in receive order, by all-to-all (width C).
  void exchange(const float* send, const std::vector<size_t>& out_rows, float* recv,
                const std::vector<size_t>& in_rows);
  void dispatch(const float* send, float* recv);
  void gather_back(const float* send, float* recv);
  // forward's parts (moe_mlp.cpp says what each does).
  size_t plan_routes(int64_t N);
  void upload_routes(size_t received);
  void run_experts(size_t received);
  // The uploaded routes (upload_routes): where each part starts in routes_.
  const int32_t* route(size_t part) const { return routes_at_ + route_begin_[part]; }
  enum RoutePart : size_t { kSendToken, kToExpert, kToReceive, kTokenStart, kTokenRows, kRouteParts };
  ParamStore& store_;
  int64_t C_, E_, k_;
  ExpertParallelComm* ep_;
  RouterSums* sums_;
  Router router_;
  int64_t first_expert_ = 0;
  std::vector<std::unique_ptr<Mlp>> experts_;  // experts first_expert_ ...
  std::vector<uint8_t> ran_;                   // per local expert: had rows in the last forward

  int64_t N_ = 0;
  // The last forward's routing: the kept (token, choice) pairs in send
  // order (by expert, then token), and the row counts.
  std::vector<int64_t> send_pair_;             // t * k + r, in send order
  std::vector<size_t> send_rows_, recv_rows_;  // per rank
  std::vector<int64_t> recv_counts_;           // (source rank, local expert) rows
  std::vector<int64_t> expert_rows_;           // per local expert, rows from all ranks
  // The routes, in the memory the kernels run in (upload_routes):
  //   kSendToken  (sent)      each send row's token
  //   kToExpert   (received)  each expert-order row's receive-order row
  //   kToReceive  (received)  each receive-order row's expert-order row
  //   kTokenStart (N + 1)     where each token's send rows start in kTokenRows
  //   kTokenRows  (sent)      the send rows of token 0, 1, ... in send order
  // and each send row's gate.
  std::vector<int32_t> routes_host_;
  std::vector<float> send_gates_host_;
  size_t route_begin_[kRouteParts + 1] = {};
  const int32_t* routes_at_ = nullptr;
  const float* send_gates_at_ = nullptr;
  DeviceArray<int32_t> routes_{memory_of(store_), MemoryKind::Activations};
  DeviceArray<float> send_gates_{memory_of(store_), MemoryKind::Activations};
  // The routed rows, where the kernels run.
  DeviceArray<float> send_{memory_of(store_), MemoryKind::Activations};      // (rows sent, C)
  DeviceArray<float> recv_{memory_of(store_), MemoryKind::Activations};      // (rows received, C)
  DeviceArray<float> returned_{memory_of(store_), MemoryKind::Activations};  // (rows sent, C): outputs, send order
  DeviceArray<float> expert_in_{memory_of(store_), MemoryKind::Activations};  // (rows received, C), expert order
  // The experts' activations, one buffer for all of them in expert order
  // (each expert its slice of the rows), so that the layer holds what this
  // step's rows need, not every expert's largest step: (rows received, 4C/T).
  DeviceArray<float> expert_h_{memory_of(store_), MemoryKind::Activations};     // c_fc's output, pre-activation
  DeviceArray<float> expert_gelu_{memory_of(store_), MemoryKind::Activations};  // c_proj's input
  DeviceArray<float> expert_out_{memory_of(store_), MemoryKind::Activations};   // outputs; backward: their gradients
  DeviceArray<float> expert_dx_{memory_of(store_), MemoryKind::Activations};    // backward: the input gradients
  DeviceArray<float> out_{memory_of(store_), MemoryKind::Activations};          // (N, C)
  DeviceArray<float> dgates_{memory_of(store_), MemoryKind::Activations};       // backward: (rows sent)
};

}  // namespace meshtrain::nn
