//===- Launch.h - Starting a job's ranks on this machine --------*- C++ -*-===//
//
// varuna-run's local launcher (torch-free): starts WORLD_SIZE copies of a
// command with the rendezvous variables torchrun sets (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) and waits.
// If a rank exits with an error or a signal, the others are stopped
// (SIGTERM, then SIGKILL after a grace period) and the launcher reports
// which rank failed and how: a dead rank never leaves the job hanging.
//
// Asked to stop (SIGTERM, SIGINT, SIGHUP or SIGUSR1, unless inherited as
// ignored), the launcher sends every rank SIGTERM once -- each rank then stops after
// its current step, with a checkpoint when the run checkpoints (Stop.h) --
// and waits; a second signal kills them, and so does a rank that the
// SIGTERM ended while it was starting (the others would wait for it). The ranks run in process groups of
// their own (a terminal's Ctrl-C reaches the launcher only) and get SIGTERM
// when the launcher dies, however it dies (VARUNA_LAUNCHER_PID in their
// environment, read by followLauncher()).
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
  /// A rank stopped (SIGSTOP, SIGTSTP, a debugger) longer than this fails
  /// the run: it is killed, naming it, and the others asked to stop. Its
  /// peers would time out too, but not all waits are bounded by the
  /// training's --timeout (a checkpoint's commit waits
  /// --checkpoint-timeout, an hour by default). 0: never.
  std::chrono::milliseconds frozenLimit{0};
};

/// A TCP port nobody listens on right now (bound and released).
int pickFreePort();

/// Whether the launcher's ranks can meet at `addr`:`port`, checked by
/// binding there as rank 0's store will: no message when they can; else
/// what is wrong -- `addr` does not resolve, is not an address of this machine
/// (the ranks would time out connecting to another machine), or `port` is
/// in use here -- naming MASTER_ADDR / MASTER_PORT and what to do.
/// `launcher`: the advice is the launcher's (it starts every rank here);
/// else it is a rank 0 started by hand (torchrun without its agent's store,
/// a script), which serves the rendezvous and so must run at MASTER_ADDR.
struct RendezvousProblem {
  /// The address: it does not resolve, or is not this machine's (for a
  /// rank 0 started by hand only a warning: NAT or a service address may
  /// reach it); else the port is in use.
  bool address = false;
  std::string message; ///< empty: none
};
RendezvousProblem checkLocalRendezvous(const std::string &addr, int port,
                                       bool launcher = true);

/// Ranks started by SLURM's srun, which sets SLURM_PROCID,
/// SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE,
/// SLURM_STEP_NODELIST and SLURM_JOB_ID rather than torchrun's variables
/// (a batch script has SLURM_PROCID too, but no SLURM_STEP_*: there
/// varuna-run stays the launcher). When RANK is unset and the step has more
/// than one task, sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE
/// from them; MASTER_ADDR, unless set, to the first host of the step's node
/// list (`node[03-05,9],gpu1` gives node03);
/// MASTER_PORT, unless set, to 20000 + the job id modulo 20000 (every task
/// derives the same). Returns "" (also when there is nothing to adopt) or
/// what is wrong (a variable that is not a number, a node list it cannot
/// read), naming the variable.
std::string adoptSlurmRank();

/// Runs the ranks; returns 0 when all exit 0 (also when a stop request came
/// as they finished: the run is complete); 128 + the signal when they
/// stopped on request (the launcher's signal, or SIGTERM when a rank was
/// asked directly); else 1 after printing (to stderr) which rank failed
/// first and how, and any other that died of a signal the launcher did not
/// send.
int launchLocalRanks(const LaunchOptions &options);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_LAUNCH_H
