//===- ByteSize.h - Byte counts on the command line -------------*- C++ -*-===//
//
// Memory sizes as people write them: `4000000000`, `4e9`, `2.5G`, `2500MB`,
// `16GiB`, `512k`. Decimal units (k/K, M, G, T: 10^3 ...) and binary ones
// (KiB, MiB, GiB, TiB: 2^10 ...), an optional trailing `B`, no space
// needed. Negative, non-finite and malformed values are rejected.
//
//   static llvm::cl::opt<double, false, varuna::ByteSizeParser> memory(
//       "memory", llvm::cl::desc("Device memory (bytes, or 16GiB, 2.5G)"));
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_SUPPORT_BYTESIZE_H
#define VARUNA_SUPPORT_BYTESIZE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

namespace varuna {

/// The bytes `text` names, or nullopt when it is not a size.
std::optional<double> parseByteSize(llvm::StringRef text);

/// A cl::opt<double> parser taking parseByteSize's forms; its error names
/// the option and the forms it takes.
class ByteSizeParser : public llvm::cl::parser<double> {
public:
  using llvm::cl::parser<double>::parser;
  bool parse(llvm::cl::Option &o, llvm::StringRef argName, llvm::StringRef arg,
             double &value);
  llvm::StringRef getValueName() const override { return "bytes"; }
};

} // namespace varuna

#endif // VARUNA_SUPPORT_BYTESIZE_H
