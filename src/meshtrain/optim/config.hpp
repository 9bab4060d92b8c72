#pragma once
// The [optimizer] section of a job config. One struct for all optimizers;
// each reads the fields it needs (listed per field) and ignores the rest.
#include <span>

#include "meshtrain/core/enum_names.hpp"

namespace meshtrain {

enum class OptimizerKind { Sgd, AdamW, Lars, Lamb };
inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {
    {OptimizerKind::Sgd, "sgd"}, {OptimizerKind::AdamW, "adamw"}, {OptimizerKind::Lars, "lars"}, {OptimizerKind::Lamb, "lamb"}};
constexpr std::span<const EnumName<OptimizerKind>> enum_names(OptimizerKind) { return kOptimizerKindNames; }

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = 1e-3;               // base learning rate, fed to the schedule (all)
  double weight_decay = 0.0;      // applied only to views with weight_decay=true (all)
  double beta1 = 0.9;             // adamw, lamb
  double beta2 = 0.999;           // adamw, lamb
  double eps = 1e-8;              // adamw, lamb
  double momentum = 0.9;          // sgd, lars; 0 keeps no momentum buffer
  bool nesterov = false;          // sgd, lars; needs momentum > 0
  double trust_coefficient = 1e-3;  // lars: eta in eta * ||w|| / (||g|| + wd * ||w||)
};

}  // namespace meshtrain
