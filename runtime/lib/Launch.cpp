//===- Launch.cpp - Starting a job's ranks on this machine ----------------===//

#include "varuna/runtime/Launch.h"
#include "varuna/runtime/Stop.h"

#include <arpa/inet.h>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <netdb.h>
#include <optional>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <poll.h>
#include <unistd.h>

extern char **environ;

namespace varuna::rt {

int pickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 29500;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

RendezvousProblem checkLocalRendezvous(const std::string &addr, int port,
                                       bool launcher) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (int err = ::getaddrinfo(addr.c_str(), nullptr, &hints, &found))
    return {true, "MASTER_ADDR '" + addr +
                      "' does not resolve: " + gai_strerror(err)};
  RendezvousProblem problem;
  bool local = false;
  for (addrinfo *a = found; a && !local; a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_STREAM, 0);
    if (fd < 0)
      continue;
    int one = 1; // as the store's server binds (TIME_WAIT is no obstacle)
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage where{};
    std::memcpy(&where, a->ai_addr, a->ai_addrlen);
    auto *in4 = reinterpret_cast<sockaddr_in *>(&where);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&where);
    if (a->ai_family == AF_INET)
      in4->sin_port = htons(uint16_t(port));
    else if (a->ai_family == AF_INET6)
      in6->sin6_port = htons(uint16_t(port));
    if (::bind(fd, reinterpret_cast<sockaddr *>(&where), a->ai_addrlen) == 0)
      local = true;
    else if (errno == EADDRINUSE)
      problem.message = "MASTER_PORT " + std::to_string(port) +
                " is in use on this machine (by another program, or another "
                "run): rank 0 serves the rendezvous there; choose another "
                "port" + (launcher ? ", or unset MASTER_PORT to take a free one"
                                   : " for every rank");
    else if (errno == EADDRNOTAVAIL && problem.message.empty())
      problem = {true, "MASTER_ADDR '" + addr + "' is not an address of this " +
                (launcher ? "machine: varuna-run starts every rank here, and "
                            "rank 0 serves the rendezvous at MASTER_ADDR; "
                            "unset it (127.0.0.1), or start the ranks of a "
                            "job across machines with torchrun or srun"
                          : "machine, and rank 0 serves the rendezvous at "
                            "MASTER_ADDR: start rank 0 on that host, or give "
                            "every rank this host's address (unless it "
                            "reaches this host through NAT or a service "
                            "address)")};
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return local ? RendezvousProblem() : problem;
}

static std::string describe(int status) {
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

/// Whether `pid` is stopped (SIGSTOP, SIGTSTP, a debugger): state T or t in
/// /proc/PID/stat. Such a rank does not exit; its peers time out waiting.
static bool isStopped(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f)
    return false;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char *close = std::strrchr(buf, ')'); // after "PID (COMM"
  return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
}

/// Whether this process's standard output is a pipe whose reader is gone
/// (`varuna-run ... | head`): rank 0 stopped on it.
static bool stdoutClosed() {
  pollfd p{STDOUT_FILENO, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

namespace {
/// The leading decimal number of `text` ("2(x3),1" gives 2), or -1.
long long leadingNumber(const char *text) {
  if (!text || !std::isdigit(static_cast<unsigned char>(*text)))
    return -1;
  return std::strtoll(text, nullptr, 10);
}

/// The first host of a SLURM node list: "a[01-03,7],b" -> "a01", "x,y" ->
/// "x", "n[1-2]-ib" -> "n1-ib", "rack[1-2]-node[01-04]" -> "rack1-node01"
/// (every bracket group gives its first number); "" when it cannot be read.
std::string firstSlurmHost(const std::string &list) {
  std::string host;
  size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    size_t stop = list.find_first_of("-,]", i + 1);
    size_t close = list.find(']', i + 1);
    if (stop == std::string::npos || stop == i + 1 ||
        close == std::string::npos)
      return "";
    host += list.substr(i + 1, stop - i - 1);
    i = close + 1;
  }
  return host;
}
} // namespace

std::string adoptSlurmRank() {
  // SLURM_STEP_NUM_TASKS: set for the tasks srun starts (a job step), not
  // in the batch script itself, which also has SLURM_PROCID=0 and the
  // job's SLURM_NTASKS -- varuna-run run there is the launcher.
  const char *procid = std::getenv("SLURM_PROCID");
  const char *ntasks = std::getenv("SLURM_STEP_NUM_TASKS");
  if (std::getenv("RANK") || !procid || !ntasks)
    return "";
  long long n = leadingNumber(ntasks), rank = leadingNumber(procid);
  if (n < 1 || rank < 0 || rank >= n)
    return std::string("SLURM_PROCID '") + procid +
           "' and SLURM_STEP_NUM_TASKS '" + ntasks +
           "' are not a rank and a task count";
  if (n == 1)
    return ""; // one task: varuna-run launches the ranks itself
  long long localRank = leadingNumber(std::getenv("SLURM_LOCALID"));
  long long perNode =
      leadingNumber(std::getenv("SLURM_STEP_TASKS_PER_NODE"));
  if (perNode < 1)
    perNode = leadingNumber(std::getenv("SLURM_TASKS_PER_NODE"));
  if (!std::getenv("MASTER_ADDR")) {
    // The step's nodes (it may run on part of the job's).
    const char *list = std::getenv("SLURM_STEP_NODELIST");
    if (!list)
      list = std::getenv("SLURM_JOB_NODELIST");
    std::string host = list ? firstSlurmHost(list) : "";
    if (host.empty())
      return std::string("cannot find rank 0's host: set MASTER_ADDR (the "
                         "node list SLURM_STEP_NODELIST is '") +
             (list ? list : "") + "')";
    ::setenv("MASTER_ADDR", host.c_str(), 1);
  }
  if (!std::getenv("MASTER_PORT")) {
    long long job = leadingNumber(std::getenv("SLURM_JOB_ID"));
    if (job < 0)
      return "set MASTER_PORT (SLURM_JOB_ID, which would give one, is not "
             "set)";
    ::setenv("MASTER_PORT", std::to_string(20000 + job % 20000).c_str(), 1);
  }
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(localRank < 0 ? 0 : localRank).c_str(),
           1);
  if (perNode > 0)
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(perNode).c_str(), 1);
  return "";
}

namespace {
/// Stop signals the launcher received (its handler only counts them; the
/// wait loop below acts on them).
volatile std::sig_atomic_t stopRequests = 0, lastStopSignal = 0;
/// Who sent the first request (a rank passes on one it got alone while
/// waiting for its peers: Stop.h).
volatile pid_t firstRequestFrom = 0;
/// When the first came (CLOCK_MONOTONIC nanoseconds).
volatile int64_t firstRequestNs = 0;
int64_t monotonicNs() {
  struct timespec t {};
  ::clock_gettime(CLOCK_MONOTONIC, &t); // async-signal-safe
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
void countStopRequest(int sig, siginfo_t *info, void *) {
  pid_t from = info ? info->si_pid : 0;
  if (stopRequests == 0) {
    firstRequestFrom = from;
    firstRequestNs = monotonicNs();
  } else if (monotonicNs() - firstRequestNs <
             std::chrono::nanoseconds(kSameStopRequest).count()) {
    // The first request again, not a second (Stop.cpp, isRepeatOfFirst):
    // GNU timeout signals its child, then its process group -- one expiry
    // read as "again: killing the ranks", which lost the stop checkpoint.
    return;
  }
  stopRequests = stopRequests + 1;
  lastStopSignal = sig;
}

/// Installs countStopRequest for the stop signals the launcher has not
/// inherited as ignored; restores the previous handlers when destroyed.
class LauncherSignals {
public:
  LauncherSignals() {
    stopRequests = 0;
    firstRequestFrom = 0;
    for (int i = 0; i < kCount; ++i) {
      ::sigaction(kSignals[i], nullptr, &previous[i]);
      if (previous[i].sa_handler == SIG_IGN)
        continue;
      struct sigaction sa {};
      sa.sa_sigaction = countStopRequest;
      sa.sa_flags = SA_SIGINFO;
      sigemptyset(&sa.sa_mask);
      ::sigaction(kSignals[i], &sa, nullptr);
    }
  }
  ~LauncherSignals() {
    for (int i = 0; i < kCount; ++i)
      ::sigaction(kSignals[i], &previous[i], nullptr);
  }

private:
  static constexpr int kCount = 4;
  static constexpr int kSignals[kCount] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
  struct sigaction previous[kCount];
};
} // namespace

int launchLocalRanks(const LaunchOptions &o) {
  // Messages name the tool that launched (varuna-run, varuna-calibrate).
  const char *tool = program_invocation_short_name;
  int port = o.masterPort ? o.masterPort : pickFreePort();
  // Checked here, at once: the ranks would find out after their --timeout
  // (another machine's address) or in c10d's words (a port in use).
  if (RendezvousProblem wrong = checkLocalRendezvous(o.masterAddr, port);
      !wrong.message.empty()) {
    std::fprintf(stderr, "%s: error: %s\n", tool, wrong.message.c_str());
    return 1;
  }
  // The parent's environment without the variables we set per rank.
  std::vector<std::string> base;
  for (char **e = environ; *e; ++e) {
    std::string v = *e;
    bool ours = false;
    for (const char *k : {"MASTER_ADDR=", "MASTER_PORT=", "RANK=",
                          "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=",
                          "VARUNA_LAUNCHER_PID="})
      ours |= v.rfind(k, 0) == 0;
    if (!ours)
      base.push_back(v);
  }
  base.insert(base.end(), o.env.begin(), o.env.end());
  base.push_back("VARUNA_LAUNCHER_PID=" + std::to_string(::getpid()));

  LauncherSignals signals;
  // Each rank in a process group of its own: a terminal's Ctrl-C reaches
  // the launcher only, which asks every rank to stop once (below).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::map<pid_t, int> rankOf;
  for (int r = 0; r < o.worldSize; ++r) {
    std::vector<std::string> env = base;
    env.push_back("MASTER_ADDR=" + o.masterAddr);
    env.push_back("MASTER_PORT=" + std::to_string(port));
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(o.worldSize));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.worldSize));
    std::vector<char *> envp, argv;
    for (std::string &s : env)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = o.argv;
    for (std::string &s : args)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid;
    int err = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(),
                          envp.data());
    if (err != 0) {
      std::fprintf(stderr, "%s: error: cannot start rank %d (%s): %s\n",
                   tool, r, argv[0], std::strerror(err));
      for (auto &[p, _] : rankOf)
        ::kill(p, SIGKILL);
      for (auto &[p, _] : rankOf)
        ::waitpid(p, nullptr, 0);
      posix_spawnattr_destroy(&attr);
      return 1;
    }
    rankOf[pid] = r;
  }
  posix_spawnattr_destroy(&attr);
  const std::map<pid_t, int> started = rankOf;

  // On a terminal, the launcher's messages start a line of their own (rank
  // 0's progress bar leaves the cursor at the end of its line).
  const char *line = ::isatty(2) ? "\r\033[K" : "";
  auto signalAll = [&](int sig) {
    for (auto &[p, _] : rankOf)
      ::kill(p, sig);
  };
  int result = 0;
  // Stopping on request: the launcher's signal (forwarded to every rank as
  // SIGTERM), or a rank that stopped on a request of its own.
  int stopSignal = 0, handled = 0;
  bool failed = false, forwarded = false, killed = false;
  // Whether a rank did stop on request (one asked after its last step
  // finishes the run: all exit 0, and so does the launcher).
  bool anyStopped = false;
  // The SIGKILL the launcher sent after a failure's grace period.
  bool graceKilled = false;
  std::optional<std::chrono::steady_clock::time_point> killAt;
  // Ranks seen stopped, since when (checked every half second).
  std::map<pid_t, std::chrono::steady_clock::time_point> frozenSince;
  auto nextFrozenCheck = std::chrono::steady_clock::now();
  while (!rankOf.empty()) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0)
      break;
    if (pid == 0) {
      int requests = stopRequests;
      if (requests > handled && handled == 0) { // the first: ask
        stopSignal = lastStopSignal;
        // (Among every rank started: the one that asked may have been
        // reaped already, having stopped at once.)
        auto byRank = started.find(pid_t(firstRequestFrom));
        if (byRank != started.end())
          // (The rank said why, and has stopped: Stop.h.)
          std::fprintf(stderr,
                       "%s%s: rank %d was asked to stop while waiting for "
                       "its peers: asking the other rank(s) to stop\n",
                       line, tool, byRank->second);
        else
          std::fprintf(stderr,
                       "%s%s: %s: asking the %zu rank(s) to stop after "
                       "their current step (with a checkpoint if "
                       "--checkpoint-dir is given); signal again to kill "
                       "them now\n",
                       line, tool, strsignal(stopSignal), rankOf.size());
        signalAll(SIGTERM);
        forwarded = true;
      }
      if (requests > handled && requests > 1) { // a second: kill
        std::fprintf(stderr, "%s%s: %s again: killing the %zu rank(s)\n",
                     line, tool, strsignal(int(lastStopSignal)), rankOf.size());
        signalAll(SIGKILL);
        killed = true;
      }
      handled = requests;
      auto now = std::chrono::steady_clock::now();
      if (o.frozenLimit.count() > 0 && !failed && now >= nextFrozenCheck) {
        nextFrozenCheck = now + std::chrono::milliseconds(500);
        for (auto &[p, r] : rankOf) {
          if (!isStopped(p)) {
            frozenSince.erase(p);
            continue;
          }
          auto since = frozenSince.emplace(p, now).first->second;
          if (now - since <= o.frozenLimit)
            continue;
          std::fprintf(stderr,
                       "%s%s: error: rank %d has been stopped (SIGSTOP or a "
                       "debugger) for over %g s (--timeout) and does not "
                       "answer its peers; killing it and stopping the "
                       "others\n",
                       line, tool, r,
                       std::chrono::duration<double>(o.frozenLimit).count());
          ::kill(p, SIGKILL);
          killed = true;
          failed = true;
          signalAll(SIGTERM);
          killAt = now + o.grace;
          break;
        }
      }
      if (killAt && std::chrono::steady_clock::now() > *killAt) {
        signalAll(SIGKILL);
        graceKilled = true;
        killAt.reset();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto it = rankOf.find(pid);
    if (it == rankOf.end())
      continue;
    int r = it->second;
    rankOf.erase(it);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    // Stopped as asked (a rank still setting up dies of the SIGTERM), or
    // killed as asked.
    bool stopped =
        (WIFEXITED(status) && WEXITSTATUS(status) == kStoppedExitStatus) ||
        (forwarded && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) ||
        (killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    if (ok)
      continue;
    if (failed) {
      // Another rank that died of a signal nobody here sent (two killed at
      // once): named too. The rest end as the first failure ended them.
      if (WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM &&
          !(WTERMSIG(status) == SIGKILL && (killed || graceKilled)))
        std::fprintf(stderr, "%s%s: error: rank %d %s too\n", line, tool, r,
                     describe(status).c_str());
      continue;
    }
    if (stopped) {
      anyStopped = true;
      if (!stopSignal)
        stopSignal = SIGTERM; // a rank was asked directly; all stop alike
      // A rank the SIGTERM ended before it could stop (it was starting):
      // the others, at the rendezvous or in the first step, would wait
      // for it until their timeout. Nothing has been trained to keep.
      if (WIFSIGNALED(status) && !killed) {
        signalAll(SIGKILL);
        killed = true;
      }
      continue;
    }
    failed = true;
    // A rank that exited with an error may only have seen its peer die (a
    // killed peer's connections close at once): a peer killed by a signal
    // in the next moments is the cause, and is named first -- before, which
    // one the launcher reaped first decided which was named.
    std::vector<int> alike; // ranks that exited with an error as well
    if (WIFEXITED(status))
      for (int i = 0; i < 15 && !rankOf.empty(); ++i) {
        int other = 0;
        pid_t q = ::waitpid(-1, &other, WNOHANG);
        if (q <= 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        auto found = rankOf.find(q);
        if (found == rankOf.end())
          continue;
        if (WIFSIGNALED(other)) {
          alike.clear(); // they saw it die
          r = found->second;
          status = other;
          rankOf.erase(found);
          break;
        }
        if (!(WIFEXITED(other) && WEXITSTATUS(other) == 0))
          alike.push_back(found->second);
        rankOf.erase(found); // another error exit: the first one speaks
      }
    std::string others;
    if (!alike.empty()) {
      others = alike.size() == 1 ? " (as did rank " : " (as did ranks ";
      for (size_t i = 0; i < alike.size(); ++i)
        others += (i ? ", " : "") + std::to_string(alike[i]);
      others += ")";
    }
    std::string stopping =
        rankOf.empty() ? std::string()
                       : "; stopping the other " +
                             std::to_string(rankOf.size()) + " rank(s)";
    // A SIGKILL nobody here sent: most often the kernel's out-of-memory
    // killer (it said only "killed by signal Killed").
    std::string why = describe(status);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !killed &&
        !graceKilled)
      why += " (by another process, or by the kernel when the machine ran "
             "out of memory: see dmesg)";
    std::fprintf(stderr, "%s%s: error: rank %d %s%s%s%s\n", line, tool, r,
                 why.c_str(), stopSignal ? " while stopping" : "",
                 others.c_str(), stopping.c_str());
    // A frozen rank is the likelier cause of a peer's failure (it timed
    // out waiting): name it too.
    for (auto &[p, other] : rankOf)
      if (isStopped(p))
        std::fprintf(stderr,
                     "%s%s: error: rank %d is stopped (SIGSTOP or a "
                     "debugger) and does not answer its peers\n",
                     line, tool, other);
    signalAll(SIGTERM);
    killAt = std::chrono::steady_clock::now() + o.grace;
  }
  if (failed)
    result = 1;
  else if (anyStopped)
    // A closed output stops the run as SIGPIPE would have ended one
    // process: 141, as the one-process run exits (it said 143).
    result = 128 + (stdoutClosed() ? SIGPIPE : stopSignal);
  else if (stopSignal)
    std::fprintf(stderr, "%s%s: the ranks had finished the run when "
                 "the stop request came\n", line, tool);
  return result;
}

} // namespace varuna::rt
