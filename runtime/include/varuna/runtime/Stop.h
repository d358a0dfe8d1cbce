//===- Stop.h - Stopping a run on request (SIGTERM, SIGINT, ...) -*- C++ -*-===//
//
// What a rank does when it is asked to stop: a spot VM's preemption notice,
// `kill`, a batch system cancelling the job, Ctrl-C, its launcher going
// away, Slurm's warning before the time limit (`--signal=USR1@N`).
// watchStopSignals() (called first thing, before any thread exists)
// routes SIGTERM, SIGINT, SIGHUP and SIGUSR1 to one thread of their own.
// While a StopOnRequest object lives, the first of them is recorded instead of
// killing the process: the trainer reads stopSignal() into the all-reduce
// that ends each step (so every rank sees a request that reached any of
// them, in the same step), and the run ends after that step -- after a
// checkpoint when it checkpoints. A second signal while a stop is pending
// (except from the launcher: Linux sends the parent-death signal once for
// each of the launcher's threads as they exit), or any signal while no
// StopOnRequest lives, ends the process as the
// signal would have (a checkpoint being written stays incomplete and is
// never taken for a good one: Checkpoint.h). A signal the process inherited
// as ignored (nohup's SIGHUP, SIGINT of a background job) stays ignored.
//
// varuna-run arms it from its start on: a request during the set-up stops
// the run after its first step -- except while the rank waits for its peers
// (the rendezvous, connecting a group: WaitingForPeers), where a peer that
// never comes would hold it for its --timeout: there it ends at once, and a
// rank that varuna-run started, asked alone, passes the request on to its
// launcher (SIGTERM), which asks every rank: the others, waiting for it,
// would otherwise wait until their --timeout.
//
// A rank that stopped on request exits with kStoppedExitStatus (128 +
// SIGTERM, what a shell reports for a process SIGTERM ended).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_STOP_H
#define VARUNA_RUNTIME_STOP_H

#include <chrono>
#include <string>

namespace varuna::rt {

constexpr int kStoppedExitStatus = 128 + 15;

/// A stop signal this soon after the first is the same request, not a
/// second one (which kills at once): GNU timeout signals its child, then
/// its process group. What a rank (Stop.cpp) and the launcher (Launch.cpp)
/// both go by.
constexpr std::chrono::milliseconds kSameStopRequest{100};

/// Blocks the stop signals in the calling thread (so in every thread it
/// creates later) and starts the thread that waits for them. Idempotent.
void watchStopSignals();

/// Arms the recording of a stop request for its lifetime (at most one at a
/// time; without watchStopSignals() it records nothing).
class StopOnRequest {
public:
  StopOnRequest();
  ~StopOnRequest();
  StopOnRequest(const StopOnRequest &) = delete;
  StopOnRequest &operator=(const StopOnRequest &) = delete;
};

/// Marks, for its lifetime, a wait for the other ranks during the set-up
/// (the transports' rendezvous and group connections: nothing has trained
/// yet, nothing to save). A stop request recorded while one lives -- or
/// before, while a StopOnRequest lives -- ends the process at once with
/// kStoppedExitStatus, after printing "`what`: stopped on request while
/// waiting for the other ranks (nothing trained yet)" to stderr. A wait
/// that fails (an exception leaves it: a peer went away) first waits up to
/// half a second for a request: the peer may have stopped on one that is
/// still on its way here (a launcher signals its ranks one after another),
/// and then this rank stops too instead of reporting the peer's absence as
/// an error. Without a StopOnRequest it changes nothing.
class WaitingForPeers {
public:
  explicit WaitingForPeers(std::string what);
  ~WaitingForPeers();
  WaitingForPeers(const WaitingForPeers &) = delete;
  WaitingForPeers &operator=(const WaitingForPeers &) = delete;

private:
  int uncaught; ///< std::uncaught_exceptions() when the wait began
};

/// The first stop signal recorded, or 0.
int stopSignal();

/// Whether the recorded stop signal came from this rank's launcher (which
/// passes its own on to every rank), not from outside to this rank alone.
bool stopFromLauncher();

/// "SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1" (else "signal N").
std::string signalName(int sig);

/// A rank started by launchLocalRanks (Launch.h) calls this first: it gets
/// SIGTERM when the launcher dies, however it dies (Linux's parent-death
/// signal), so no rank trains on unwatched. Returns false when the launcher
/// is already gone. For ranks started otherwise (torchrun, srun: their
/// launchers signal their ranks themselves) it does nothing and returns true.
bool followLauncher();

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_STOP_H
