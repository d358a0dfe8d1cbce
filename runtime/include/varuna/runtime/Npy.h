//===- Npy.h - Reading and writing NumPy .npy files --------------*- C++ -*-===//
//
// The runtime's data loader reads one `.npy` per graph input; varuna-eval
// reads the same files. Supported: format versions 1.0, 2.0 and 3.0,
// little-endian (or byte-order-free) data in C order, dtypes f2 f4 f8 i1 u1
// i2 u2 i4 u4 i8 b1. Errors throw varuna::rt::DataError naming the file and the cause.
// No dependency on libtorch.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_NPY_H
#define VARUNA_RUNTIME_NPY_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace varuna::rt {

/// A malformed, missing or unsupported data file (npy, parameter bytes).
class DataError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The bytes of a whole file; a DataError naming the path if it cannot be
/// opened or read.
std::vector<uint8_t> readFileBytes(const std::string &path);

/// Element types of .npy files we read and write.
enum class DType { F16, F32, F64, I8, U8, I16, U16, I32, U32, I64, Bool };

/// Bytes per element.
size_t dtypeSize(DType type);
/// The numpy descr we write (`<f4`, `|b1`, ...).
const char *dtypeDescr(DType type);
/// A readable name (`float32`, `bool`, ...).
const char *dtypeName(DType type);
/// Parses a numpy descr (`<f4`, `|u1`, `=i8` on little-endian hosts, ...).
std::optional<DType> parseDtypeDescr(std::string_view descr);

/// A dense C-order array: shape, element type and the raw little-endian bytes.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< empty for a 0-d (scalar) array
  std::vector<uint8_t> data;  ///< numElements() * dtypeSize(dtype) bytes

  int64_t numElements() const;
  size_t numBytes() const { return data.size(); }
};

/// What a .npy header says: the element type, the shape and where the data
/// starts. Its data's size is checked not to overflow (at most 2^62 bytes).
struct NpyHeader {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t dataOffset = 0; ///< bytes before the data
  uint64_t dataBytes = 0;  ///< elements x dtypeSize
};

/// Reads and checks the header of the .npy file open on `fd` (with pread:
/// the file position is left alone; the data is not read). Throws DataError
/// naming `path` as readNpy does for a bad header.
NpyHeader readNpyHeader(int fd, const std::string &path);

/// Reads `path`. Throws DataError on a missing file, an empty file, a zip
/// archive (.npz), bad magic, truncated header or data, Fortran order,
/// big-endian, structured or unsupported dtypes.
NpyArray readNpy(const std::string &path);

/// Parses an in-memory .npy image; `name` is used in error messages.
NpyArray parseNpy(const void *bytes, size_t size, const std::string &name);

/// Writes a version 1.0 (or 2.0 if the header needs it) .npy file.
void writeNpy(const std::string &path, const NpyArray &array);
void writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data);

/// `[2, 16]`-style rendering of a shape for messages.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_NPY_H
