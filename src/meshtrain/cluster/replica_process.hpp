#pragma once
// One replica's process as the supervisor runs it (replica_supervisor.hpp):
// started with its own environment over the supervisor's, its stdout and
// stderr read through pipes and forwarded line by line with its label, its
// exit status read and described.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "meshtrain/cluster/output_forwarder.hpp"
#include "meshtrain/cluster/replica_supervisor.hpp"

namespace meshtrain {

// One running replica: its pid, the read ends of its output pipes, the
// partial line of each stream not yet forwarded, and what the supervisor
// knows of it.
struct ReplicaProcess {
  const Replica* replica = nullptr;
  std::string heartbeat_file;  // empty: no heartbeats
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr
  std::string pending[2];
  bool exited = false;
  bool stopped = false;  // we sent it SIGTERM: its status is not a failure
  int status = 0;
  int restarted = 0;     // times started again alone after a failure, in this group
  std::chrono::steady_clock::time_point started;
  std::string hung;      // set when we killed it for missing heartbeats: why
};

// Starts c.replica with the supervisor's environment, less the launch
// variables, plus `own_env` (workers writing to a terminal through us may
// draw a progress bar). Throws Error when it cannot fork or make a pipe; a
// missing program is the child exiting with status 127.
void spawn_replica(ReplicaProcess& c, const std::vector<std::string>& own_env, bool terminal);
// Forwards whatever output the processes have ready, waiting up to
// timeout_ms for some.
void pump_output(std::vector<ReplicaProcess>& processes, OutputForwarder& forwarder, int timeout_ms);
// Forwards what an exited process wrote last and closes its pipes; a
// grandchild that still holds them open does not keep us waiting.
void drain_output(ReplicaProcess& c, OutputForwarder& forwarder);

// Exit statuses as waitpid() gives them.
bool exited_with(int status, int code);
bool failed(int status);  // anything but exiting with 0
int exit_code_of(int status);  // 128 + N for a signal N
// "worker 2 exited with status 3", "rank 1 killed by signal 9 (Killed)".
std::string describe(const std::string& label, int status);
// "2.5 s"
std::string seconds_text(double s);

}  // namespace meshtrain
