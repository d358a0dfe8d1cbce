//===- Agreement.cpp - Ranks started with the same settings ---------------===//

#include "varuna/runtime/Agreement.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace varuna::rt {

/// FNV-1a, kept to 31 bits: the sum over up to 2^21 ranks stays exact in a
/// double.
static int64_t hash31(const std::string &s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return static_cast<int64_t>((h ^ (h >> 31)) & 0x7fffffffULL);
}

void checkSameSettings(Group &world, const std::vector<Setting> &settings) {
  if (world.size() < 2 || settings.empty())
    return;
  int64_t n = static_cast<int64_t>(settings.size());
  at::Tensor mine = at::empty({n}, at::kDouble);
  for (int64_t i = 0; i < n; ++i)
    mine[i] = static_cast<double>(hash31(settings[i].value));
  std::vector<at::Tensor> sums{mine.clone()};
  world.allreduceSum(sums);
  for (int64_t i = 0; i < n; ++i) {
    if (sums[0][i].item<double>() == mine[i].item<double>() * world.size())
      continue;
    std::string value = settings[i].value;
    if (value.size() > 240)
      value = value.substr(0, 240) + "...";
    throw std::runtime_error(
        settings[i].name + " differs between the ranks: here (rank " +
        std::to_string(world.rank()) + " of " + std::to_string(world.size()) +
        ") it is " + value +
        "; start every rank with the same options, training configuration "
        "and job");
  }
}

int64_t valueOfRankZero(Group &world, int64_t value) {
  if (world.size() < 2)
    return value;
  std::vector<at::Tensor> sum{at::full(
      {1}, world.rank() == 0 ? static_cast<double>(value) : 0.0, at::kDouble)};
  world.allreduceSum(sum);
  return static_cast<int64_t>(sum[0].item<double>());
}

std::vector<int64_t> gatherHashes(Group &world, const std::string &value) {
  at::Tensor all = at::zeros({world.size()}, at::kDouble);
  all[world.rank()] = static_cast<double>(hash31(value));
  std::vector<at::Tensor> sums{all};
  world.allreduceSum(sums);
  std::vector<int64_t> out(world.size());
  for (int r = 0; r < world.size(); ++r)
    out[r] = static_cast<int64_t>(sums[0][r].item<double>());
  return out;
}

std::string hostIdentity() {
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  struct stat ns {};
  std::string net = ::stat("/proc/self/ns/net", &ns) == 0
                        ? std::to_string(ns.st_ino)
                        : std::string();
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return boot + "/" + net + "/" + name;
}

} // namespace varuna::rt
