#pragma once
// NCCL's settings that meshtrain relies on, put into the process's
// environment before NCCL reads them at its first load. Part of the comm
// layer on every build (NCCL or not), so that `meshtrain train` sets them
// first thing, before it starts a thread: setenv while another thread runs
// getenv is a data race. nccl_library() sets them again before its dlopen
// (the same values; for programs other than the meshtrain command).
namespace meshtrain::comm::nccl {

// NCCL_LAUNCH_ORDER_IMPLICIT=1: a worker's communicators on one GPU (the
// data group's buckets, the expert-data group's, the tensor axis's
// all-reduces) each have a stream of their own, and NCCL's kernels wait for
// their peers: had two GPUs run two communicators' kernels in different
// orders, each would wait for the other for ever. This keeps the host's
// order of issue across a device's communicators (NCCL 2.28.9's library
// knows the name; a release without it ignores it), and the host issues in
// the same order on every worker. A value the user set is kept.
void set_environment();

}  // namespace meshtrain::comm::nccl
