//===- ByteSize.cpp - Byte counts on the command line ---------------------===//

#include "varuna/Support/ByteSize.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <cstdlib>
#include <string>

using namespace llvm;

std::optional<double> varuna::parseByteSize(StringRef text) {
  text = text.trim();
  // The number: the longest prefix strtod takes.
  std::string s = text.str();
  char *end = nullptr;
  double number = std::strtod(s.c_str(), &end);
  if (end == s.c_str())
    return std::nullopt;
  StringRef unit = StringRef(end).trim();
  std::optional<double> scale =
      StringSwitch<std::optional<double>>(unit.lower())
          .Cases("", "b", 1.0)
          .Cases("k", "kb", 1e3)
          .Cases("m", "mb", 1e6)
          .Cases("g", "gb", 1e9)
          .Cases("t", "tb", 1e12)
          .Cases("ki", "kib", 1024.0)
          .Cases("mi", "mib", 1024.0 * 1024)
          .Cases("gi", "gib", 1024.0 * 1024 * 1024)
          .Cases("ti", "tib", 1024.0 * 1024 * 1024 * 1024)
          .Default(std::nullopt);
  if (!scale || !std::isfinite(number) || number < 0)
    return std::nullopt;
  return number * *scale;
}

bool varuna::ByteSizeParser::parse(cl::Option &o, StringRef argName,
                                   StringRef arg, double &value) {
  if (std::optional<double> bytes = parseByteSize(arg)) {
    value = *bytes;
    return false;
  }
  return o.error("'" + arg +
                 "' is not a size in bytes (e.g. 4000000000, 4e9, 2.5G, "
                 "2500MB, 16GiB)");
}
