//===- ByteSize.cpp - Byte counts on the command line ---------------------===//

#include "varuna/Support/ByteSize.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <cstdlib>
#include <string>

using namespace llvm;

std::optional<double> varuna::parseByteSize(StringRef text) {
  text = text.trim();
  // The number: decimal digits, a point, an exponent -- no sign, no hex
  // (strtod would take "0x1e3" as 483), whatever the locale.
  size_t n = 0;
  while (n < text.size() && (isDigit(text[n]) || text[n] == '.'))
    ++n;
  if (n < text.size() && (text[n] == 'e' || text[n] == 'E')) {
    size_t e = n + 1;
    if (e < text.size() && (text[e] == '+' || text[e] == '-'))
      ++e;
    size_t digits = e;
    while (digits < text.size() && isDigit(text[digits]))
      ++digits;
    if (digits > e)
      n = digits;
  }
  double number = 0;
  if (n == 0 || text.take_front(n).getAsDouble(number))
    return std::nullopt;
  // 1e-400 reads as 0 ("no limit" to some options): not a size.
  if (number == 0 && text.take_front(n).find_first_of("123456789") !=
                         StringRef::npos)
    return std::nullopt;
  StringRef unit = text.drop_front(n).trim();
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
