//===- JobDigest.h - Which compiled job a file belongs to -------*- C++ -*-===//
//
// A digest of a job's job.mlir (xxHash64 of its bytes but the path of the
// model file it was compiled from, 16 hex digits), so that what is measured
// or decided for one job -- a calibration, the settings the ranks of a run
// compare -- is not taken for another's.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_SUPPORT_JOBDIGEST_H
#define VARUNA_SUPPORT_JOBDIGEST_H

#include "llvm/ADT/StringRef.h"
#include <string>

namespace varuna {

/// The digest of the file at `jobMlirPath`; empty when it cannot be read.
std::string jobFileDigest(llvm::StringRef jobMlirPath);

} // namespace varuna

#endif // VARUNA_SUPPORT_JOBDIGEST_H
