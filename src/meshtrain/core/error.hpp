#pragma once
// Typed errors. Code below main() throws; only main() decides to exit, so a
// supervisor can restart a rank and a test can assert on the message.
#include <stdexcept>
#include <string>

namespace meshtrain {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A job config, override or command-line value that is malformed or out of range.
struct ConfigError : Error {
  using Error::Error;
};
// A data file that is missing, unreadable or malformed.
struct DataError : Error {
  using Error::Error;
};
// A checkpoint that is missing, truncated, corrupt or does not match the model.
struct CheckpointError : Error {
  using Error::Error;
};
// A communication failure: a peer that died or timed out, a malformed or
// unauthenticated frame, mismatched sizes across ranks, a port in use.
struct CommError : Error {
  using Error::Error;
};
// The job asked for a device this process cannot use: no GPU driver, no
// such GPU, a CUDA build missing, or a CUDA error at start. Like bad input,
// running the same job again on this machine cannot help.
struct DeviceError : Error {
  using Error::Error;
};
// The training diverged: a loss or gradient that is not finite. The same
// data replays it, so a supervisor does not restart the job (kExitDiverged).
struct DivergedError : Error {
  using Error::Error;
};
// Any I/O failure outside the cases above (a directory that cannot be written...).
struct IoError : Error {
  using Error::Error;
};

// Exit status of a `meshtrain` process that failed on its configuration,
// input data or device (ConfigError, DataError, DeviceError): running it
// again cannot help, so a supervisor does not restart it. Other errors exit with status 1.
inline constexpr int kExitBadInput = 3;
// Exit status of a worker stopped by SIGTERM or SIGUSR1 (a preemption) after
// it wrote a checkpoint of the step it was in: resuming continues the run.
// A supervisor does not count it as a failure (docs/long-jobs.md).
inline constexpr int kExitPreempted = 4;
// Exit status of a job that diverged (DivergedError): not restarted.
inline constexpr int kExitDiverged = 5;

}  // namespace meshtrain
