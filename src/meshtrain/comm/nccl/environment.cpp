#include "meshtrain/comm/nccl/environment.hpp"

#include <stdlib.h>

namespace meshtrain::comm::nccl {

void set_environment() { ::setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", /*overwrite=*/0); }

}  // namespace meshtrain::comm::nccl
