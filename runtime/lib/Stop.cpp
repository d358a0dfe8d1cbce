//===- Stop.cpp - Stopping a run on request -------------------------------===//

#include "varuna/runtime/Stop.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <csignal>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <pthread.h>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>

namespace varuna::rt {

namespace {
std::atomic<bool> armed{false};
std::atomic<int> received{0};
std::atomic<bool> watching{false};
/// The launcher's pid (followLauncher), else 0.
std::atomic<pid_t> launcher{0};
std::atomic<bool> fromLauncher{false}; // the recorded signal's sender
/// When the first request came: see isRepeatOfFirst.
std::chrono::steady_clock::time_point firstAt; // written once, by the watcher
/// What the live WaitingForPeers waits for (empty: none); the signal thread
/// holds the lock while it ends the process, so the wait cannot end under it.
std::mutex waitingLock;
std::string waitingFor;

/// Ends the process for a stop request that came while waiting for `what`.
[[noreturn]] void stopWhileWaiting(const std::string &what) {
  // On a terminal, a line of its own (rank 0's progress bar may be on it).
  std::string msg = (::isatty(2) ? "\n" : "") + what +
                    ": stopped on request while waiting for the other ranks "
                    "(nothing trained yet)\n";
  ssize_t ignored = ::write(2, msg.data(), msg.size());
  (void)ignored;
  // Asked alone (not by the launcher, which asks every rank): the others,
  // waiting for this one, would wait until their --timeout. The launcher
  // that started it passes a stop request on to all.
  pid_t parent = launcher.load();
  if (parent > 0 && !fromLauncher.load() && ::getppid() == parent)
    ::kill(parent, SIGTERM);
  std::_Exit(kStoppedExitStatus);
}

/// The stop signals this process has not inherited as ignored.
sigset_t watchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) {
    struct sigaction current{};
    if (::sigaction(sig, nullptr, &current) == 0 &&
        current.sa_handler == SIG_IGN)
      continue;
    sigaddset(&set, sig);
  }
  return set;
}

/// Whether a signal is the first request again rather than a second one:
/// a stop signal within kSameStopRequest of it, whoever sent it. GNU timeout sends
/// SIGTERM to its child and then to its whole process group, the child
/// included (one expiry, two signals), and passes on a SIGTERM it gets
/// (pkill of both: two more); srun and schedulers may signal every process
/// of a job as well as its launcher. Taken as a second request, each killed
/// the run without its stop checkpoint (when the first had been taken
/// before the next came; pending, they merged). No one presses Ctrl-C
/// twice within 100 ms: pressed again, or a signal sent again a moment
/// later, still kills at once.
bool isRepeatOfFirst() {
  return std::chrono::steady_clock::now() - firstAt < kSameStopRequest;
}

/// Ends the process as `sig` would have: default action, delivered to this
/// thread (the only one where it is unblocked).
[[noreturn]] void dieOf(int sig) {
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::pthread_kill(::pthread_self(), sig);
  std::_Exit(128 + sig); // not reached
}
} // namespace

void watchStopSignals() {
  if (watching.exchange(true))
    return;
  sigset_t set = watchedSignals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      siginfo_t info{};
      int sig = ::sigwaitinfo(&set, &info);
      if (sig < 0)
        continue;
      int none = 0;
      bool byLauncher = launcher.load() && info.si_pid == launcher.load();
      if (armed.load() && received.compare_exchange_strong(none, sig)) {
        firstAt = std::chrono::steady_clock::now();
        fromLauncher.store(byLauncher);
        std::lock_guard<std::mutex> lock(waitingLock);
        if (!waitingFor.empty())
          stopWhileWaiting(waitingFor);
        continue; // the trainer stops after this step
      }
      // The launcher asks once; when it dies, each of its threads' exits
      // sends the parent-death signal again. It escalates with SIGKILL.
      if (received.load() && launcher.load() &&
          info.si_pid == launcher.load())
        continue;
      if (received.load() && isRepeatOfFirst())
        continue;
      dieOf(sig);
    }
  }).detach();
}

StopOnRequest::StopOnRequest() { armed.store(true); }
StopOnRequest::~StopOnRequest() { armed.store(false); }

WaitingForPeers::WaitingForPeers(std::string what)
    : uncaught(std::uncaught_exceptions()) {
  std::lock_guard<std::mutex> lock(waitingLock);
  if (armed.load() && received.load())
    stopWhileWaiting(what);
  waitingFor = std::move(what);
}

WaitingForPeers::~WaitingForPeers() {
  if (std::uncaught_exceptions() > uncaught && armed.load()) {
    for (int i = 0; i < 50 && !received.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard<std::mutex> lock(waitingLock);
    if (received.load())
      stopWhileWaiting(waitingFor);
  }
  std::lock_guard<std::mutex> lock(waitingLock);
  waitingFor.clear();
}

int stopSignal() { return received.load(); }

bool stopFromLauncher() { return fromLauncher.load(); }

std::string signalName(int sig) {
  switch (sig) {
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  case SIGHUP:
    return "SIGHUP";
  case SIGUSR1:
    return "SIGUSR1";
  default:
    return "signal " + std::to_string(sig);
  }
}

bool followLauncher() {
  const char *pid = std::getenv("VARUNA_LAUNCHER_PID");
  if (!pid)
    return true;
  launcher.store(static_cast<pid_t>(std::atoll(pid)));
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  return ::getppid() == launcher.load();
}

} // namespace varuna::rt
