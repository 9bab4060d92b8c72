#include "meshtrain/optim/clip.hpp"

#include <cmath>
#include <string>

#include "meshtrain/core/error.hpp"
#include "meshtrain/kernels/backend.hpp"
#include "meshtrain/kernels/clip_math.hpp"
#include "meshtrain/kernels/norm.hpp"

namespace meshtrain {

double squared_norm_range(std::span<const float> x, size_t begin, size_t end) {
  if (begin > end || end > x.size())
    throw Error("squared_norm_range: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") outside a buffer of " + std::to_string(x.size()) + " elements");
  return kernels::squared_norm(x.data(), begin, end);
}

float clip_coefficient(double norm, float max_norm) { return kernels::clip_factor(norm, max_norm); }

void scale_range(std::span<float> x, size_t begin, size_t end, float factor) {
  if (begin > end || end > x.size())
    throw Error("scale_range: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") outside a buffer of " + std::to_string(x.size()) + " elements");
  kernels::scale(x.data() + begin, end - begin, factor);
}

float clip_grad_norm(ParamStore& store, float max_norm) {
  if (!(max_norm > 0)) throw Error("clip_grad_norm: max_norm must be > 0, got " + std::to_string(max_norm));
  const double norm = std::sqrt(grad_squared_norm(store));
  const float coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0f) {
    const std::span<float> grads = store.kernel_grads();
    kernels::backend_for(store.device()).scale(grads.data(), grads.size(), coef);
  }
  return float(norm);
}

double grad_squared_norm(ParamStore& store) {
  const std::span<float> grads = store.kernel_grads();
  return kernels::backend_for(store.device()).squared_norm(grads.data(), 0, grads.size());
}

}  // namespace meshtrain
