//===- Launch.cpp - Starting a job's ranks on this machine ----------------===//

#include "varuna/runtime/Launch.h"

#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
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

static std::string describe(int status) {
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

int launchLocalRanks(const LaunchOptions &o) {
  int port = o.masterPort ? o.masterPort : pickFreePort();
  // The parent's environment without the variables we set per rank.
  std::vector<std::string> base;
  for (char **e = environ; *e; ++e) {
    std::string v = *e;
    bool ours = false;
    for (const char *k : {"MASTER_ADDR=", "MASTER_PORT=", "RANK=",
                          "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE="})
      ours |= v.rfind(k, 0) == 0;
    if (!ours)
      base.push_back(v);
  }
  base.insert(base.end(), o.env.begin(), o.env.end());

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
    int err = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(),
                          envp.data());
    if (err != 0) {
      std::fprintf(stderr, "varuna-run: error: cannot start rank %d (%s): %s\n",
                   r, argv[0], std::strerror(err));
      for (auto &[p, _] : rankOf)
        ::kill(p, SIGKILL);
      for (auto &[p, _] : rankOf)
        ::waitpid(p, nullptr, 0);
      return 1;
    }
    rankOf[pid] = r;
  }

  int result = 0;
  while (!rankOf.empty()) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0)
      break;
    auto it = rankOf.find(pid);
    if (it == rankOf.end())
      continue;
    int r = it->second;
    rankOf.erase(it);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok || result != 0)
      continue;
    result = 1;
    std::fprintf(stderr,
                 "varuna-run: error: rank %d %s; stopping the other %zu "
                 "rank(s)\n",
                 r, describe(status).c_str(), rankOf.size());
    for (auto &[p, _] : rankOf)
      ::kill(p, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + o.grace;
    while (!rankOf.empty() && std::chrono::steady_clock::now() < deadline) {
      pid_t q = ::waitpid(-1, &status, WNOHANG);
      if (q > 0)
        rankOf.erase(q);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto &[p, _] : rankOf)
      ::kill(p, SIGKILL);
  }
  return result;
}

} // namespace varuna::rt
