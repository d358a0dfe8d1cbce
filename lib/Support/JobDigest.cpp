//===- JobDigest.cpp - Which compiled job a file belongs to ---------------===//

#include "varuna/Support/JobDigest.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/xxhash.h"

std::string varuna::jobFileDigest(llvm::StringRef jobMlirPath) {
  auto buf = llvm::MemoryBuffer::getFile(jobMlirPath);
  if (!buf)
    return "";
  return llvm::utohexstr(llvm::xxHash64((*buf)->getBuffer()), /*LowerCase=*/true,
                         /*Width=*/16);
}
