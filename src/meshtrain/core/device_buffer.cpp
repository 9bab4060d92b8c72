#include "meshtrain/core/device_buffer.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain {

void throw_device_copy_too_large(size_t count, size_t size) {
  throw Error("device copy of " + std::to_string(count) + " elements into or out of a buffer of " +
              std::to_string(size));
}

}  // namespace meshtrain
