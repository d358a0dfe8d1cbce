//===- Launch.h - Starting a job's ranks on this machine --------*- C++ -*-===//
//
// varuna-run's local launcher (torch-free): starts WORLD_SIZE copies of a
// command with the rendezvous variables torchrun sets (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) and waits.
// If a rank exits with an error or a signal, the others are stopped
// (SIGTERM, then SIGKILL after a grace period) and the launcher reports
// which rank failed and how: a dead rank never leaves the job hanging.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_LAUNCH_H
#define VARUNA_RUNTIME_LAUNCH_H

#include <chrono>
#include <string>
#include <vector>

namespace varuna::rt {

struct LaunchOptions {
  std::vector<std::string> argv; ///< argv[0] is the executable's path
  int worldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0; ///< 0: a free port of this machine
  /// Extra environment for every rank (NAME=value).
  std::vector<std::string> env;
  std::chrono::seconds grace{5};
};

/// A TCP port nobody listens on right now (bound and released).
int pickFreePort();

/// Runs the ranks; returns 0 when all exit 0, else 1 after printing (to
/// stderr) which rank failed first and how.
int launchLocalRanks(const LaunchOptions &options);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_LAUNCH_H
