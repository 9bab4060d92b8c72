#include "meshtrain/parallel/host_staging.hpp"

#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::parallel {

DeviceAllocator* staging_memory(const ParamStore& store) {
  return store.on_host() ? nullptr : &kernels::backend_for(store.device()).allocator();
}

}  // namespace meshtrain::parallel
