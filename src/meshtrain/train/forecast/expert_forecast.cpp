#include "meshtrain/train/forecast/expert_forecast.hpp"

#include <algorithm>
#include <vector>

#include "meshtrain/nn/gpt.hpp"

namespace meshtrain {

std::vector<ExpertLayerTraffic> expert_traffic(const std::vector<Model*>& models, const ModelSection& model,
                                               int expert_ways) {
  std::vector<ExpertLayerTraffic> layers;
  const int64_t E = model.n_expert, X = expert_ways, local = E / X;
  for (Model* m : models) {
    auto* gpt = dynamic_cast<Gpt*>(m);
    if (!gpt) continue;
    for (const GptMoeLayer& l : gpt->moe_layers()) {
      // The router's last forward (the probe's last micro-batch): its kept
      // choices per expert.
      const nn::Router& router = *l.router;
      const int64_t tokens = router.tokens();
      ExpertLayerTraffic t;
      t.sums = l.sums->values().size();
      std::vector<double> kept(size_t(E), 0.0);
      for (int64_t i = 0; i < tokens * router.top_k(); ++i)
        if (router.kept()[i]) kept[size_t(router.choices()[i])] += 1;
      double choices = 0;
      for (double c : kept) choices += c;
      if (tokens <= 0 || choices <= 0) {  // never routed: balanced
        t.even = double(model.top_k);
        t.received = t.even;
        t.remote = t.even * double(X - 1) / double(X);
        layers.push_back(t);
        continue;
      }
      double busiest = 0;
      for (int64_t r = 0; r < X; ++r) {
        double rows = 0;
        for (int64_t e = r * local; e < (r + 1) * local; ++e) rows += kept[size_t(e)];
        busiest = std::max(busiest, rows / double(tokens));
      }
      t.even = choices / double(tokens);
      t.received = double(X) * busiest;
      t.remote = std::max(double(X - 1) * busiest, t.even - busiest);
      layers.push_back(t);
    }
  }
  return layers;
}

double routing_imbalance(const std::vector<ExpertLayerTraffic>& layers) {
  double received = 0, even = 0;
  for (const ExpertLayerTraffic& l : layers) received += l.received, even += l.even;
  return even > 0 ? received / even : 1.0;
}

ExpertComm expert_all_to_all_comm(const std::vector<ExpertLayerTraffic>& layers, int64_t rows, int64_t C,
                                  int64_t n_expert, int expert_ways, int64_t micro_batches,
                                  const comm::CostTable& links, size_t value_bytes) {
  ExpertComm c;
  const int X = expert_ways;
  if (X <= 1) return c;
  const size_t counts = size_t(n_expert) * sizeof(int64_t);  // X ranks x E / X experts each
  for (const ExpertLayerTraffic& l : layers) {
    const double remote_bytes = l.remote * double(rows) * double(C) * double(value_bytes);
    const size_t per_rank = size_t(remote_bytes * X / (X - 1));
    c.seconds += comm::all_gather_seconds(links, counts, X) + 4 * comm::all_gather_seconds(links, per_rank, X);
    c.bytes += double(counts) * (X - 1) / X + 4 * remote_bytes;
  }
  c.seconds *= double(micro_batches);
  c.bytes *= double(micro_batches);
  return c;
}

}  // namespace meshtrain
