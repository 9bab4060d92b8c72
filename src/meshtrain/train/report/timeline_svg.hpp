#pragma once
// A pipeline trace (pipeline_trace.hpp) drawn as an SVG timeline, so a user
// sees the bubble: one row per worker, time left to right, a box per action
// coloured by kind (forward, backward, its input and weight halves, sends
// and receives), the micro-batch number in boxes wide enough, and the step's
// length and measured bubble in the title.
#include <string>

namespace meshtrain {

// Throws DataError when the text is not a trace with actions.
std::string render_timeline_svg(const std::string& trace_json, const std::string& title);

}  // namespace meshtrain
