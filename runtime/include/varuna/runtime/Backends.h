//===- Backends.h - Which communication backends are built ------*- C++ -*-===//
//
// The transports themselves (point-to-point activations, all-reduce) come with
// the distributed runtime; this header reports what the build links.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_BACKENDS_H
#define VARUNA_RUNTIME_BACKENDS_H

#include <string>

namespace varuna::rt {

/// "Gloo" if the Gloo transport is compiled in, else empty.
std::string glooVersion();
/// NCCL's version ("2.28.3") if compiled with CUDA + NCCL, else empty. Does
/// not touch a GPU.
std::string ncclVersion();

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_BACKENDS_H
