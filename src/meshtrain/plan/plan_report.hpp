#pragma once
// A plan for people (a table and the recommendation) and for programs (JSON
// with the same numbers, bytes and seconds unscaled).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "meshtrain/plan/batch_rule.hpp"
#include "meshtrain/plan/plan_input.hpp"
#include "meshtrain/plan/recommendation.hpp"
#include "meshtrain/plan/strategies.hpp"
#include "meshtrain/plan/strategy_estimate.hpp"

namespace meshtrain::plan {

struct Plan {
  PlanInput input;
  TrainingAmount amount;
  std::vector<StrategyEstimate> strategies{};
  Recommendation recommendation{};
  LearningRateAdvice learning_rate{};
};

// Validates the input (ConfigError) and computes everything.
Plan make_plan(const PlanInput& input);

std::string format_plan(const Plan& plan);
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace meshtrain::plan
