#pragma once
// A plan drawn: per strategy, the memory per device stacked by kind against
// the usable memory, and the step time on a log scale; the recommended one
// marked. Self-contained SVG (no scripts, no external fonts).
#include <string>

#include "meshtrain/plan/plan_report.hpp"

namespace meshtrain::plan {

std::string render_plan_svg(const Plan& plan);

}  // namespace meshtrain::plan
