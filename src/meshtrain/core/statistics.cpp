#include "meshtrain/core/statistics.hpp"

#include <algorithm>

namespace meshtrain {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + long(mid), values.end());
  if (values.size() % 2) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + long(mid));
  return (lower + upper) / 2;
}

}  // namespace meshtrain
