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

/// The digest `#varuna.data` records (its `digest`): the CRC-32 (zlib) of
/// the first 4 KiB of `bytes` followed by their last 4 KiB (all of them when
/// `size` <= 8 KiB). Cheap for any size; any re-export with other weights or
/// another layout changes it.
uint32_t paramDigest(const void *bytes, int64_t size);

/// paramDigest of bytes [offset, offset + size) of baseDir/file, reading only
/// the 8 KiB it needs. Throws DataError as readParamBytes.
uint32_t fileParamDigest(const std::string &baseDir, const std::string &file,
                         int64_t offset, int64_t size);

/// Same, for callers built without exceptions (the importers): false, with
/// DataError's message in `error`, instead of throwing.
bool fileParamDigest(const std::string &baseDir, const std::string &file,
                     int64_t offset, int64_t size, uint32_t &digest,
                     std::string &error) noexcept;

/// Same, returning a new buffer.
std::vector<uint8_t> readParamBytes(const std::string &baseDir,
                                    const std::string &file, int64_t offset,
                                    int64_t size);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_PARAMDATA_H
