//===- JSON.h - Parsing the JSON files users hand us ------------*- C++ -*-===//
//
// llvm::json::parse recurses once per nesting level: a training
// configuration of 50000 nested arrays overflowed the stack (a segfault in
// varuna-compile, varuna-plan and varuna-run). parseUserJSON refuses such
// nesting first; use it for every file a user writes or may damage
// (training configurations, plans, calibrations).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_SUPPORT_JSON_H
#define VARUNA_SUPPORT_JSON_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

namespace varuna {

/// How deeply `text`'s arrays and objects nest (brackets inside strings not
/// counted); for any text, JSON or not.
unsigned jsonNestingDepth(llvm::StringRef text);

/// llvm::json::parse(text), but text nesting deeper than `maxDepth` is an
/// error ("arrays and objects nest N deep, more than M") without parsing.
llvm::Expected<llvm::json::Value> parseUserJSON(llvm::StringRef text,
                                                unsigned maxDepth = 64);

} // namespace varuna

#endif // VARUNA_SUPPORT_JSON_H
