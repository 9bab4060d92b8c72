#include "meshtrain/nn/model.hpp"

#include "meshtrain/kernels/backend.hpp"

namespace meshtrain {

Model::Model(const Device& device) {
  if (!device.is_cpu()) store_.set_device(device, &kernels::backend_for(device).allocator());
}

}  // namespace meshtrain
