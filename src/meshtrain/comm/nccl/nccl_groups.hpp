#pragma once
// NCCL communicators for a worker's mesh groups (comm/mesh/mesh_groups.hpp):
// one communicator over all the workers, its unique id made by worker 0 and
// broadcast over the host's `all` group (which every launcher already
// connected: torchrun, Slurm, Kubeflow, `meshtrain launch`), then one per
// group split from it (ncclCommSplit: color = the group's first worker,
// key = the group rank), each attached to its group as the engine of its
// device collectives (ProcessGroup::use_device_engine). The tied
// embedding's pairs, cut on the first and last pipeline stages only, are
// split off too: ncclCommSplit wants every rank of the parent, so the
// workers in no pair (the middle stages) split with NCCL_SPLIT_NOCOLOR,
// after one host all-reduce tells every worker whether any pair exists.
//
// Every worker calls it, after choosing NCCL (device_collectives_choice.hpp)
// with its own GPU current.
#include <cuda_runtime_api.h>

#include "meshtrain/comm/mesh/mesh_groups.hpp"

namespace meshtrain::comm::nccl {

// `compute`: the stream the kernels run on; `timeout_s`: parallel.timeout_s.
void use_nccl(MeshGroups& groups, cudaStream_t compute, double timeout_s);

}  // namespace meshtrain::comm::nccl
