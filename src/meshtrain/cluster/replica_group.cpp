#include "meshtrain/cluster/replica_group.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

// A child to start again: the same replica, nothing of the old process.
ReplicaProcess fresh(const ReplicaProcess& old) {
  ReplicaProcess c;
  c.replica = old.replica;
  c.heartbeat_file = old.heartbeat_file;
  return c;
}

}  // namespace

ReplicaGroup::ReplicaGroup(const std::vector<Replica>& replicas, OutputForwarder& forwarder, bool terminal)
    : forwarder_(forwarder), terminal_(terminal), children_(replicas.size()) {
  for (size_t i = 0; i < replicas.size(); ++i) children_[i].replica = &replicas[i];
}

void ReplicaGroup::start_all(int restarts, const std::string& name) {
  for (auto& c : children_) c = fresh(c);
  try {
    for (auto& c : children_) start(c, restarts);
  } catch (const Error& e) {
    kill_started_and_wait();
    flush_remaining();
    throw Error(name + ": cannot start the job's processes: " + e.what());
  }
}

void ReplicaGroup::kill_started_and_wait() {
  for (auto& c : children_)
    if (c.pid > 0) kill(c.pid, SIGKILL);
  for (auto& c : children_)
    if (c.pid > 0) waitpid(c.pid, nullptr, 0);
}

void ReplicaGroup::restart_alone(ReplicaProcess& c, int restarts) {
  const int restarted = c.restarted + 1;
  c = fresh(c);
  c.restarted = restarted;
  start(c, restarts);
}

void ReplicaGroup::start(ReplicaProcess& c, int restarts) {
  std::vector<std::string> env = c.replica->env;
  if (restarts > 0)
    for (auto& kv : env)
      if (kv.rfind("MESHTRAIN_JOB_ID=", 0) == 0) kv += "-r" + std::to_string(restarts);
  if (!c.heartbeat_file.empty()) {
    unlink(c.heartbeat_file.c_str());  // a beat of an earlier process is no sign of this one's life
    env.push_back("MESHTRAIN_HEARTBEAT_FILE=" + c.heartbeat_file);
  }
  forwarder_.forget_recent_lines(c.replica->label);
  spawn_replica(c, env, terminal_);
}

void ReplicaGroup::flush_remaining() {
  for (auto& c : children_) drain_output(c, forwarder_);
}

std::vector<size_t> ReplicaGroup::collect_exited() {
  std::vector<size_t> ended;
  for (size_t i = 0; i < children_.size(); ++i) {
    ReplicaProcess& c = children_[i];
    if (c.exited || c.pid <= 0 || waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
    c.exited = true;
    ended.push_back(i);
  }
  std::stable_partition(ended.begin(), ended.end(), [&](size_t i) { return WIFSIGNALED(children_[i].status); });
  return ended;
}

int ReplicaGroup::running() const {
  int n = 0;
  for (const auto& c : children_) n += !c.exited;
  return n;
}

bool ReplicaGroup::workers_ended() const {
  for (const auto& c : children_)
    if (c.replica->kind == ReplicaKind::Worker && !c.exited) return false;
  return true;
}

bool ReplicaGroup::workers_done() const {
  for (const auto& c : children_)
    if (c.replica->kind == ReplicaKind::Worker && (!c.exited || failed(c.status))) return false;
  return true;
}

bool ReplicaGroup::workers_checkpointed() const {
  for (const auto& c : children_)
    if (c.replica->kind == ReplicaKind::Worker &&
        (!c.exited || !(exited_with(c.status, kExitPreempted) || exited_with(c.status, 0))))
      return false;
  return true;
}

void ReplicaGroup::stop_workers(int sig, std::chrono::milliseconds grace) {
  for (auto& c : children_)
    if (c.replica->kind == ReplicaKind::Worker && !c.exited && !c.stopped && c.pid > 0) {
      kill(c.pid, sig);
      c.stopped = true;
    }
  kill_after(grace);
}

void ReplicaGroup::stop_all(std::chrono::milliseconds grace) {
  for (auto& c : children_)
    if (!c.exited && !c.stopped && c.pid > 0) {
      kill(c.pid, SIGTERM);
      c.stopped = true;
    }
  kill_after(grace);
}

void ReplicaGroup::terminate_running() {
  for (auto& c : children_)
    if (!c.exited && c.pid > 0) kill(c.pid, SIGTERM);
}

void ReplicaGroup::kill_after(std::chrono::milliseconds grace) {
  if (!kill_at_) kill_at_ = std::chrono::steady_clock::now() + grace;
}

void ReplicaGroup::kill_if_due() {
  if (!kill_at_ || std::chrono::steady_clock::now() <= *kill_at_) return;
  for (auto& c : children_)
    if (!c.exited) kill(c.pid, SIGKILL);
  kill_at_.reset();
}

}  // namespace meshtrain
