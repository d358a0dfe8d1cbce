//===- Agreement.cpp - Ranks started with the same settings ---------------===//

#include "varuna/runtime/Agreement.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <stdexcept>

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

} // namespace varuna::rt
