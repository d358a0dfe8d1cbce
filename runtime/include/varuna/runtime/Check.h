//===- Check.h - Checked calls into communication libraries -----*- C++ -*-===//
//
// Every call into NCCL, CUDA or Gloo goes through one of these macros. A
// failure throws varuna::rt::Error carrying the call, file, line and the
// library's own error string; callers at the top of a rank turn it into a
// clear message and a non-zero exit (never an abort without a message).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_CHECK_H
#define VARUNA_RUNTIME_CHECK_H

#include <stdexcept>
#include <string>

namespace varuna::rt {

class Error : public std::runtime_error {
public:
  Error(const std::string &library, const std::string &call,
        const std::string &detail, const char *file, int line)
      : std::runtime_error(library + " call '" + call + "' failed at " +
                           file + ":" + std::to_string(line) + ": " + detail),
        library(library) {}
  std::string library;
};

} // namespace varuna::rt

/// Gloo reports errors by throwing gloo::Exception (a std::runtime_error).
#define VARUNA_CHECK_GLOO(call)                                                \
  do {                                                                         \
    try {                                                                      \
      call;                                                                    \
    } catch (const std::exception &e) {                                        \
      throw ::varuna::rt::Error("Gloo", #call, e.what(), __FILE__, __LINE__);  \
    }                                                                          \
  } while (0)

#ifdef VARUNA_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#define VARUNA_CHECK_CUDA(call)                                                \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess)                                                   \
      throw ::varuna::rt::Error("CUDA", #call, cudaGetErrorString(err_),       \
                                __FILE__, __LINE__);                           \
  } while (0)

#define VARUNA_CHECK_NCCL(call)                                                \
  do {                                                                         \
    ncclResult_t res_ = (call);                                                \
    if (res_ != ncclSuccess && res_ != ncclInProgress)                         \
      throw ::varuna::rt::Error("NCCL", #call, ncclGetErrorString(res_),       \
                                __FILE__, __LINE__);                           \
  } while (0)
#endif

#endif // VARUNA_RUNTIME_CHECK_H
