#pragma once
// Small statistics over measured samples, shared by the benchmarks, the
// machine profile and the job forecast.
#include <vector>

namespace meshtrain {

// The middle value (the mean of the two middle ones for an even count);
// 0 for no values. Robust to a few outliers, which timings on a shared
// machine always have.
double median(std::vector<double> values);

}  // namespace meshtrain
