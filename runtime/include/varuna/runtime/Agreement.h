//===- Agreement.h - Ranks started with the same settings -------*- C++ -*-===//
//
// Ranks started by hand (torchrun, srun, a script) each parse their own
// command line and files. Ranks that disagree on what they train -- another
// learning rate, batch, step count or job -- would silently train different
// things (replicas drifting apart) or fail later with a misleading
// communication error. checkSameSettings compares them once, before the
// first step.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_AGREEMENT_H
#define VARUNA_RUNTIME_AGREEMENT_H

#include "varuna/runtime/Transport.h"

#include <string>
#include <vector>

namespace varuna::rt {

/// One thing every rank must share: its name as the user knows it (an
/// option, "the training configuration", "the job") and its value as text.
struct Setting {
  std::string name, value;
};

/// Checks that every rank of `world` holds the same values of `settings`
/// (the same names in the same order on every rank: the caller's code fixes
/// them). Each value is hashed (FNV-1a) to 31 bits and one all-reduce sums
/// the hashes; a sum other than size x this rank's hash means some rank
/// holds another value. Throws std::runtime_error naming the first such
/// setting and this rank's value ("... differs between the ranks: here
/// (rank R of N) it is V"). A collision hides a difference with
/// probability 2^-31 per setting. A collective on `world`: every rank calls
/// it at the same point.
void checkSameSettings(Group &world, const std::vector<Setting> &settings);

/// Each rank's `value` hashed to 31 bits (as checkSameSettings does), in
/// rank order, on every rank: one all-reduce. A collective on `world`.
std::vector<int64_t> gatherHashes(Group &world, const std::string &value);

/// Rank 0's `value` (|value| < 2^53), on every rank: one all-reduce. A
/// collective on `world`.
int64_t valueOfRankZero(Group &world, int64_t value);

/// What tells this host apart from another: the kernel's boot id, the
/// network namespace and the host name (so that ranks in their own network
/// namespaces, scripts/netns.sh, count as hosts of their own, talking over
/// a real link).
std::string hostIdentity();

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_AGREEMENT_H
