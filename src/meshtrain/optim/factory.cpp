#include "meshtrain/optim/factory.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/optim/adamw.hpp"
#include "meshtrain/optim/lamb.hpp"
#include "meshtrain/optim/lars.hpp"
#include "meshtrain/optim/sgd.hpp"

namespace meshtrain {
namespace {

// Shortest round-trip-ish text ("1e-08", "0.9"), not std::to_string's "0.000000".
std::string number(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// Throws unless lo <= x (or lo < x) and x < hi (or x <= hi); NaN always fails.
void check_range(const char* key, double x, double lo, bool lo_open, double hi, bool hi_open,
                 const char* expected) {
  bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  if (!ok) throw ConfigError(std::string("optimizer.") + key + ": must be " + expected + ", got " + number(x));
}

constexpr double kInf = INFINITY;

}  // namespace

void validate_optimizer_config(const OptimizerConfig& c) {
  const bool sgd = c.kind == OptimizerKind::Sgd, adamw = c.kind == OptimizerKind::AdamW,
             lars = c.kind == OptimizerKind::Lars, lamb = c.kind == OptimizerKind::Lamb;
  check_range("lr", c.lr, 0, false, kInf, true, "finite and >= 0");
  check_range("weight_decay", c.weight_decay, 0, false, kInf, true, "finite and >= 0");
  if (adamw || lamb) {
    check_range("beta1", c.beta1, 0, false, 1, true, "in [0, 1)");
    check_range("beta2", c.beta2, 0, false, 1, true, "in [0, 1)");
    check_range("eps", c.eps, 0, false, kInf, true, "finite and >= 0");
  }
  if (sgd || lars) {
    check_range("momentum", c.momentum, 0, false, 1, true, "in [0, 1)");
    if (c.nesterov && c.momentum == 0)
      throw ConfigError("optimizer.nesterov: Nesterov momentum needs optimizer.momentum > 0");
  }
  if (lars) check_range("trust_coefficient", c.trust_coefficient, 0, true, kInf, true, "finite and > 0");
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const ParamStore& store) {
  return make_optimizer(config, store, FlatSegments{{.begin = 0, .end = store.flat_size(), .local = 0}});
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const ParamStore& store,
                                          std::span<const FlatSegment> segments) {
  validate_optimizer_config(config);
  switch (config.kind) {
    case OptimizerKind::Sgd: return std::make_unique<Sgd>(store, segments, config);
    case OptimizerKind::AdamW: return std::make_unique<AdamW>(store, segments, config);
    case OptimizerKind::Lars: return std::make_unique<Lars>(store, segments, config);
    case OptimizerKind::Lamb: break;
  }
  return std::make_unique<Lamb>(store, segments, config);
}

}  // namespace meshtrain
