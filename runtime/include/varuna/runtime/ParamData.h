//===- ParamData.h - Reading parameters' initial bytes ----------*- C++ -*-===//
//
// A parameter's initial values are `size` bytes at `offset` of `file`
// (`#varuna.data<file, offset, size>` in the IR), where `file` is relative to
// the directory of the source model or absolute. These functions read them
// with pread(2) in bounded chunks, so multi-GB weight files work and only the
// bytes asked for are touched. Errors throw varuna::rt::DataError naming the
// file, the byte range and the cause. No dependency on libtorch.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_PARAMDATA_H
#define VARUNA_RUNTIME_PARAMDATA_H

#include "varuna/runtime/Npy.h"

#include <cstdint>
#include <string>
#include <vector>

namespace varuna::rt {

/// `file` if it is absolute (or `baseDir` is empty), else `baseDir/file`.
std::string resolveDataPath(const std::string &baseDir, const std::string &file);

/// Reads bytes [offset, offset + size) of baseDir/file into `dst` (which must
/// hold `size` bytes). Throws DataError if the file is missing, unreadable or
/// shorter than offset + size.
void readParamBytes(const std::string &baseDir, const std::string &file,
                    int64_t offset, int64_t size, void *dst);

/// Same, returning a new buffer.
std::vector<uint8_t> readParamBytes(const std::string &baseDir,
                                    const std::string &file, int64_t offset,
                                    int64_t size);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_PARAMDATA_H
