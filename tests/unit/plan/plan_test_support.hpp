#pragma once
// Inputs shared by the planner's tests: the reference notes' scenarios.
#include "meshtrain/plan/plan_keys.hpp"

namespace meshtrain::plan::testing {

// Builds an input from "section.key=value" strings, as the command line would.
inline PlanInput input_from(const std::vector<std::string>& assignments) {
  std::vector<std::string> flags;
  for (const std::string& a : assignments) flags.push_back("--" + a);
  PlanValues values;
  read_plan_flags(flags, values);
  return plan_input_from(values);
}

}  // namespace meshtrain::plan::testing
