//===- JSON.cpp - Parsing the JSON files users hand us --------------------===//

#include "varuna/Support/JSON.h"

#include "llvm/Support/Error.h"

#include <algorithm>
#include <string>

namespace varuna {

unsigned jsonNestingDepth(llvm::StringRef text) {
  unsigned depth = 0, deepest = 0;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < e && text[i] != '"';)
        i += text[i] == '\\' ? 2 : 1;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

llvm::Expected<llvm::json::Value> parseUserJSON(llvm::StringRef text,
                                                unsigned maxDepth) {
  if (unsigned depth = jsonNestingDepth(text); depth > maxDepth)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "arrays and objects nest " + std::to_string(depth) +
            " deep, more than " + std::to_string(maxDepth));
  return llvm::json::parse(text);
}

} // namespace varuna
