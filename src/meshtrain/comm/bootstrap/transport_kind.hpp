#pragma once
// Which transport a rank connects with (connect.hpp): Auto lets the launcher
// decide (MESHTRAIN_TRANSPORT), else shared memory when every rank is on
// this host and TCP otherwise; Mpi only under mpirun/srun with an MPI build.
#include <span>

#include "meshtrain/core/enum_names.hpp"

namespace meshtrain::comm {

enum class TransportKind { Auto, Shm, Tcp, Mpi };
inline constexpr EnumName<TransportKind> kTransportKindNames[] = {
    {TransportKind::Auto, "auto"}, {TransportKind::Shm, "shm"}, {TransportKind::Tcp, "tcp"}, {TransportKind::Mpi, "mpi"}};
constexpr std::span<const EnumName<TransportKind>> enum_names(TransportKind) { return kTransportKindNames; }

}  // namespace meshtrain::comm
