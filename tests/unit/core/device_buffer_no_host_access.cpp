// Compiled, never run, by device_buffer_no_host_access.sh: as written
// (PROBE 0) it compiles; each PROBE n > 0 adds one host access to device
// memory, which must be a compile error (core/device_buffer.hpp).
#include <span>

#include "meshtrain/core/device_buffer.hpp"

float probe(meshtrain::DeviceBuffer<float>& buf) {
  meshtrain::DevicePtr<float> p = buf.ptr();
  float* for_a_kernel = p.raw();  // the one way out: to a launcher
  (void)for_a_kernel;
#if PROBE == 1
  return buf[0];
#elif PROBE == 2
  return *buf.ptr();
#elif PROBE == 3
  return buf.ptr()[0];
#elif PROBE == 4
  std::span<float> s(buf);
  return s[0];
#elif PROBE == 5
  return buf.data()[0];
#elif PROBE == 6
  float* q = buf.ptr();
  return *q;
#else
  return 0.0f;
#endif
}
