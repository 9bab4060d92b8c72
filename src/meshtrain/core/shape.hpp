#pragma once
// A tensor shape: dims in row-major order, outermost first.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace meshtrain {

using Shape = std::vector<int64_t>;

// Product of the dims; 1 for a scalar (empty shape).
int64_t numel(const Shape& shape);
// "(4, 256)" style text for messages.
std::string shape_string(const Shape& shape);

}  // namespace meshtrain
