#pragma once
// training.device = "cpu-guarded": the CPU's kernels (cpu_backend()) on
// memory the host cannot touch outside them. Every allocation lives in one
// reserved region that is PROT_NONE except while a backend call, or the
// allocator's own zero / upload / download, runs; so a host loop that reads
// parameters, gradients, optimizer state or activations anywhere else dies
// with SIGSEGV at that line, as it would on a GPU, where it reads garbage or
// faults far from the cause. The numbers are the CPU's, bit for bit: the
// device suites train on it and compare against "cpu" (docs/gpu.md).
//
// A debugging device, slower than the CPU (two mprotect calls a kernel), and
// one process only: collectives read the host's memory (part 2 of the GPU
// path moves them onto devices).
#include "meshtrain/kernels/backend.hpp"

namespace meshtrain::kernels {

Backend& guarded_backend();

}  // namespace meshtrain::kernels
