#include "meshtrain/comm/group/process_group.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "meshtrain/comm/group/group_transport.hpp"
#include "meshtrain/comm/reduction_server/worker.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::comm {
namespace {

std::vector<int> iota_ranks(int n) {
  std::vector<int> ranks(static_cast<size_t>(n));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

std::string shape(size_t count, DataType dtype) {
  return std::to_string(count) + " x " + std::string(dtype_name(dtype));
}

std::string rank_list(std::span<const int> ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

// What a blocking call's *_async hands its own wait(): the operation has
// already run, so one shared, finished Work serves every such call.
WorkHandle finished_blocking_call() {
  static const WorkHandle done = [] {
    auto work = std::make_shared<Work>("a finished blocking call");
    work->start();
    work->finish(nullptr);
    return work;
  }();
  return done;
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<Communicator> comm)
    : ProcessGroup(comm, iota_ranks(comm ? comm->size() : 0), "all") {}

ProcessGroup::ProcessGroup(std::shared_ptr<Communicator> comm, std::vector<int> members, std::string_view name)
    : comm_(std::move(comm)), name_(name) {
  if (!comm_) throw CommError("ProcessGroup: no communicator given");
  const int world = comm_->size();
  if (members.empty()) throw CommError("ProcessGroup: a group needs at least one member");
  for (int m : members)
    if (m < 0 || m >= world)
      throw CommError("ProcessGroup " + rank_list(members) + ": rank " + std::to_string(m) +
                      " is outside the world of " + std::to_string(world));
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw CommError("ProcessGroup " + rank_list(members) + ": a rank appears twice");
  const auto self = std::find(members.begin(), members.end(), comm_->rank());
  if (self == members.end())
    throw CommError("ProcessGroup " + rank_list(members) + ": this process (rank " + std::to_string(comm_->rank()) +
                    ") is not a member");
  rank_ = int(self - members.begin());
  members_ = std::make_shared<const std::vector<int>>(std::move(members));
  flight_group_ = flight::register_group(name_, *members_, rank_);
}

int ProcessGroup::global_rank(int group_rank) const {
  check_group_rank("global_rank", "rank", group_rank);
  return (*members_)[size_t(group_rank)];
}

void ProcessGroup::check_group_rank(const char* what, const char* role, int group_rank) const {
  if (group_rank < 0 || group_rank >= size())
    throw CommError(std::string(what) + " on group " + rank_list(*members_) + ": " + role + " " +
                    std::to_string(group_rank) + " is outside the group of " + std::to_string(size()));
}

namespace {

// Runs op between the flight recorder's started and finished marks. A
// fault (fault_injection.hpp, a testing knob) may run a barrier instead.
template <class Op>
void run_recorded(const flight::Slot& slot, flight::Fault fault, Transport& t, const CollectiveOptions& o,
                  const Op& op) {
  flight::started(slot);
  try {
    if (fault == flight::Fault::OtherCollective) [[unlikely]]
      comm::barrier(t);
    else
      op(t, o);
  } catch (...) {
    flight::finished(slot, false);
    throw;
  }
  flight::finished(slot, true);
}

}  // namespace

template <class Op>
WorkHandle ProcessGroup::submit(flight::Entry call, DescriptionRef describe, Op&& op) {
  flight::Fault fault = flight::Fault::None;
  if (flight::fault_armed()) [[unlikely]] {
    fault = flight::take_fault(name_, call.op);
    if (fault == flight::Fault::Skip) return finished_blocking_call();  // as if the call were never made
    if (fault == flight::Fault::OtherCollective) call = {.op = flight::Op::Barrier};
    if (fault == flight::Fault::SizeMismatch) call.bytes /= 2;
  }
  call.seq = ++collectives_;
  return dispatch(std::span<const flight::Entry>(&call, 1), fault, describe, std::forward<Op>(op));
}

template <class Op>
WorkHandle ProcessGroup::dispatch(std::span<const flight::Entry> entries, flight::Fault fault, DescriptionRef describe,
                                  Op&& op) {
  const flight::Slot slot = flight::schedule(flight_group_, entries);
  const bool halve = fault == flight::Fault::SizeMismatch;
  const auto described = [&] { return describe() + " on group " + rank_list(*members_); };
  if (blocking_) {
    // Runs before this returns: everything by reference, nothing allocated.
    comm_->run_blocking(described, [&](Transport& global) {
      GroupTransport group(global, *members_, rank_, bytes_sent_.get(), halve);
      run_recorded(slot, fault, group, comm_->options(), op);
    });  // throws the CommError on failure
    return finished_blocking_call();
  }
  return comm_->submit(described(), [members = members_, rank = rank_, op = std::forward<Op>(op), comm = comm_.get(),
                                     sent = bytes_sent_, slot, fault, halve](Transport& global) {
    GroupTransport group(global, *members, rank, sent.get(), halve);
    run_recorded(slot, fault, group, comm->options(), op);
  });
}

uint64_t ProcessGroup::next_p2p(flight::Op op, int peer) {
  std::vector<uint64_t>& counts = op == flight::Op::Send ? sends_ : recvs_;
  if (counts.empty()) counts.assign(size_t(size()), 0);
  return ++counts[size_t(peer)];
}

void ProcessGroup::use_reducers(std::vector<int> reducer_ranks, size_t chunk_bytes, int in_flight) {
  if (reducer_ranks.empty()) throw CommError("use_reducers: no reducer ranks given");
  for (int r : reducer_ranks) {
    if (r < 0 || r >= comm_->size())
      throw CommError("use_reducers: reducer rank " + std::to_string(r) + " is outside the world of " +
                      std::to_string(comm_->size()));
    if (std::find(members_->begin(), members_->end(), r) != members_->end())
      throw CommError("use_reducers: rank " + std::to_string(r) + " is a member of the group, not a reducer");
  }
  if (chunk_bytes == 0 || in_flight < 1 || in_flight > reduction_server::kMaxInFlight)
    throw CommError("use_reducers: chunks of " + std::to_string(chunk_bytes) + " bytes, " +
                    std::to_string(in_flight) + " in flight (want > 0 bytes, 1.." +
                    std::to_string(reduction_server::kMaxInFlight) + " in flight)");
  reducers_ = std::make_shared<Reducers>(Reducers{std::move(reducer_ranks), chunk_bytes, in_flight, 0});
}

WorkHandle ProcessGroup::shutdown_reducers_async() {
  if (!reducers_) throw CommError("shutdown_reducers: the group has no reducers");
  auto reducers = reducers_;
  auto members = members_;
  return comm_->submit("reduction_server shutdown", [reducers, members](Transport& world) {
    reduction_server::shutdown(world, {*members, reducers->ranks, reducers->chunk_bytes, reducers->in_flight});
  });
}

WorkHandle ProcessGroup::all_reduce_async(Buffer data, ReduceKind op, AllReduceAlgorithm algorithm) {
  if (algorithm == AllReduceAlgorithm::ReductionServer) {
    if (!reducers_)
      throw CommError("all_reduce: reduction_server needs reducer processes (ProcessGroup::use_reducers)");
    auto reducers = reducers_;
    auto members = members_;
    const uint64_t sequence = reducers->sequence++;
    const flight::Entry call{.op = flight::Op::AllReduce, .algorithm = uint8_t(algorithm), .seq = ++collectives_,
                             .bytes = data.bytes()};
    const flight::Slot slot = flight::schedule(flight_group_, {&call, 1});
    // The world transport, not the group's: the reducers are outside the group.
    return comm_->submit("all_reduce(reduction_server, " + std::string(reduce_kind_name(op)) + ", " +
                             shape(data.count, data.dtype) + ")",
                         [=](Transport& world) {
                           const auto reduce = [&](Transport& t, const CollectiveOptions&) {
                             reduction_server::all_reduce(t,
                                                          {*members, reducers->ranks, reducers->chunk_bytes,
                                                           reducers->in_flight},
                                                          data, op, sequence);
                           };
                           run_recorded(slot, flight::Fault::None, world, {}, reduce);
                         });
  }
  return submit(
      {.op = flight::Op::AllReduce, .algorithm = uint8_t(algorithm), .bytes = data.bytes()},
      [&] {
        return "all_reduce(" + std::string(algorithm_name(algorithm)) + ", " + std::string(reduce_kind_name(op)) +
               ", " + shape(data.count, data.dtype) + ")";
      },
      [=](Transport& t, const CollectiveOptions& o) { comm::all_reduce(t, data, op, algorithm, o); });
}

WorkHandle ProcessGroup::reduce_scatter_async(ConstBuffer input, Buffer output, ReduceKind op) {
  if (input.dtype != output.dtype || input.count != size_t(size()) * output.count)
    throw CommError("reduce_scatter: input " + shape(input.count, input.dtype) + " must be " +
                    std::to_string(size()) + " ranks x output " + shape(output.count, output.dtype));
  return submit(
      {.op = flight::Op::ReduceScatter, .bytes = output.bytes()},
      [&] {
        return "reduce_scatter(" + std::string(reduce_kind_name(op)) + ", " + shape(output.count, output.dtype) +
               " per rank)";
      },
      [=](Transport& t, const CollectiveOptions& o) { comm::reduce_scatter(t, input, output, op, o); });
}

WorkHandle ProcessGroup::reduce_scatter_in_place_async(Buffer data, Buffer output, ReduceKind op) {
  if (data.dtype != output.dtype || data.count != size_t(size()) * output.count)
    throw CommError("reduce_scatter_in_place: data " + shape(data.count, data.dtype) + " must be " +
                    std::to_string(size()) + " ranks x output " + shape(output.count, output.dtype));
  return submit(
      {.op = flight::Op::ReduceScatter, .bytes = output.bytes()},
      [&] {
        return "reduce_scatter_in_place(" + std::string(reduce_kind_name(op)) + ", " +
               shape(output.count, output.dtype) + " per rank)";
      },
      [=](Transport& t, const CollectiveOptions& o) { comm::reduce_scatter_in_place(t, data, output, op, o); });
}

WorkHandle ProcessGroup::all_gather_async(ConstBuffer input, Buffer output) {
  if (input.dtype != output.dtype || output.count != size_t(size()) * input.count)
    throw CommError("all_gather: output " + shape(output.count, output.dtype) + " must be " +
                    std::to_string(size()) + " ranks x input " + shape(input.count, input.dtype));
  return submit({.op = flight::Op::AllGather, .bytes = input.bytes()},
                [&] { return "all_gather(" + shape(input.count, input.dtype) + " per rank)"; },
                [=](Transport& t, const CollectiveOptions& o) { comm::all_gather(t, input, output, o); });
}

WorkHandle ProcessGroup::broadcast_async(Buffer data, int root) {
  check_group_rank("broadcast", "root", root);
  return submit({.op = flight::Op::Broadcast, .peer = root, .bytes = data.bytes()},
                [&] { return "broadcast(root " + std::to_string(root) + ", " + shape(data.count, data.dtype) + ")"; },
                [=](Transport& t, const CollectiveOptions& o) { comm::broadcast(t, data, root, o); });
}

WorkHandle ProcessGroup::reduce_async(Buffer data, int root, ReduceKind op) {
  check_group_rank("reduce", "root", root);
  return submit({.op = flight::Op::Reduce, .peer = root, .bytes = data.bytes()},
                [&] { return "reduce(root " + std::to_string(root) + ", " + std::string(reduce_kind_name(op)) + ", " +
                    shape(data.count, data.dtype) + ")"; },
                [=](Transport& t, const CollectiveOptions& o) { comm::reduce(t, data, root, op, o); });
}

WorkHandle ProcessGroup::all_to_all_async(ConstBuffer input, Buffer output) {
  if (input.dtype != output.dtype || input.count != output.count || input.count % size_t(size()) != 0)
    throw CommError("all_to_all: input " + shape(input.count, input.dtype) + " and output " +
                    shape(output.count, output.dtype) + " must be the same multiple of " + std::to_string(size()));
  return submit({.op = flight::Op::AllToAll, .bytes = input.bytes()},
                [&] { return "all_to_all(" + shape(input.count, input.dtype) + ")"; },
                [=](Transport& t, const CollectiveOptions& o) { comm::all_to_all(t, input, output, o); });
}

WorkHandle ProcessGroup::all_to_all_v_async(ConstBuffer input, std::vector<size_t> send_counts, Buffer output,
                                            std::vector<size_t> recv_counts) {
  const size_t n = size_t(size());
  const size_t sent = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0});
  const size_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
  if (send_counts.size() != n || recv_counts.size() != n || sent != input.count || received != output.count ||
      input.dtype != output.dtype)
    throw CommError("all_to_all_v: need " + std::to_string(n) + " send and receive counts adding up to input " +
                    shape(input.count, input.dtype) + " and output " + shape(output.count, output.dtype));
  return submit(
      {.op = flight::Op::AllToAllV, .bytes = input.bytes()},
      [&] { return "all_to_all_v(" + shape(input.count, input.dtype) + " out, " + std::to_string(output.count) + " in)"; },
      [=, s = std::move(send_counts), r = std::move(recv_counts)](Transport& t, const CollectiveOptions& o) {
        comm::all_to_all_v(t, input, s, output, r, o);
      });
}

WorkHandle ProcessGroup::barrier_async() {
  return submit({.op = flight::Op::Barrier}, [] { return std::string("barrier"); },
                [](Transport& t, const CollectiveOptions&) { comm::barrier(t); });
}

WorkHandle ProcessGroup::send_async(ConstBuffer data, int peer) {
  check_group_rank("send", "peer", peer);
  if (peer == rank_) throw CommError("send: a rank cannot send to itself (group rank " + std::to_string(peer) + ")");
  const flight::Entry call{.op = flight::Op::Send, .peer = peer, .seq = next_p2p(flight::Op::Send, peer),
                           .bytes = data.bytes()};
  return dispatch({&call, 1}, flight::Fault::None,
                [&] { return "send(to " + std::to_string(peer) + ", " + shape(data.count, data.dtype) + ")"; },
                [=](Transport& t, const CollectiveOptions&) { t.send(peer, data.data, data.bytes()); });
}

WorkHandle ProcessGroup::recv_async(Buffer data, int peer) {
  check_group_rank("recv", "peer", peer);
  if (peer == rank_) throw CommError("recv: a rank cannot receive from itself (group rank " + std::to_string(peer) + ")");
  const flight::Entry call{.op = flight::Op::Recv, .peer = peer, .seq = next_p2p(flight::Op::Recv, peer),
                           .bytes = data.bytes()};
  return dispatch({&call, 1}, flight::Fault::None,
                [&] { return "recv(from " + std::to_string(peer) + ", " + shape(data.count, data.dtype) + ")"; },
                [=](Transport& t, const CollectiveOptions&) { t.recv(peer, data.data, data.bytes()); });
}

WorkHandle ProcessGroup::exchange_async(std::vector<SendOp> sends, std::vector<RecvOp> recvs) {
  for (const SendOp& op : sends) {
    check_group_rank("exchange", "send peer", op.peer);
    if (op.peer == rank_) throw CommError("exchange: a rank cannot send to itself (group rank " + std::to_string(op.peer) + ")");
  }
  for (const RecvOp& op : recvs) {
    check_group_rank("exchange", "receive peer", op.peer);
    if (op.peer == rank_)
      throw CommError("exchange: a rank cannot receive from itself (group rank " + std::to_string(op.peer) + ")");
  }
  // Described now: the operation takes the lists (a pipeline step makes a
  // few exchanges per micro-batch, so the text costs nothing that counts).
  std::string text = "exchange(";
  for (const SendOp& op : sends) text += "send " + std::to_string(op.bytes) + " B to " + std::to_string(op.peer) + ", ";
  for (const RecvOp& op : recvs) text += "recv " + std::to_string(op.bytes) + " B from " + std::to_string(op.peer) + ", ";
  text = (sends.empty() && recvs.empty() ? text : text.substr(0, text.size() - 2)) + ")";
  std::vector<flight::Entry> entries;
  entries.reserve(sends.size() + recvs.size());
  for (const SendOp& op : sends)
    entries.push_back(
        {.op = flight::Op::Send, .peer = op.peer, .seq = next_p2p(flight::Op::Send, op.peer), .bytes = op.bytes});
  for (const RecvOp& op : recvs)
    entries.push_back(
        {.op = flight::Op::Recv, .peer = op.peer, .seq = next_p2p(flight::Op::Recv, op.peer), .bytes = op.bytes});
  return dispatch(
      entries, flight::Fault::None,
      [&] { return text; },
      [sends = std::move(sends), recvs = std::move(recvs)](Transport& t, const CollectiveOptions&) {
        t.exchange(sends, recvs);
      });
}

}  // namespace meshtrain::comm
