//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// Checkpoint sections are stored as safetensors files, the format PyTorch and
// Hugging Face users read with `safetensors.torch.load_file` /
// `safetensors.numpy.load_file`. Layout (written from the published format
// description):
//
//   8 bytes     N, unsigned little-endian: the length of the JSON header
//   N bytes     UTF-8 JSON object: {"<name>": {"dtype": "F32", "shape": [2, 3],
//               "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
//               (may be padded with trailing spaces)
//   rest        the byte buffer: each tensor's little-endian C-order data at
//               [begin, end) relative to the buffer's start
//
// The reader validates everything and throws varuna::rt::DataError naming the
// file: header length within the file, well-formed JSON, known dtypes, shapes
// and offsets that are non-negative integers, sizes equal to dtype x shape,
// offsets in range, non-overlapping and covering the buffer exactly.
//
// This header also carries the tiny JSON reader/writer the checkpoint manifest
// shares with the safetensors header. No dependency on libtorch.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_SAFETENSORS_H
#define VARUNA_RUNTIME_SAFETENSORS_H

#include "varuna/runtime/Npy.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace varuna::rt {

/// One named tensor as raw bytes: `dtype` is a safetensors dtype string
/// (`F32`, `I64`, `BF16`, ...), the bytes are numElements() x dtype size,
/// little-endian, C order. They are `data`, or -- to write a tensor without
/// copying it (a checkpoint of a big stage would double its memory) --
/// `view` bytes that `keepAlive` (or the caller) holds.
struct TensorBytes {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape; ///< empty for a scalar
  std::vector<uint8_t> data;
  const uint8_t *view = nullptr; ///< when set: viewSize bytes used instead
  size_t viewSize = 0;
  std::shared_ptr<const void> keepAlive;

  int64_t numElements() const;
  const uint8_t *bytes() const { return view ? view : data.data(); }
  size_t byteSize() const { return view ? viewSize : data.size(); }
};

/// The free-form `__metadata__` map (string to string, per the format).
using SafetensorsMetadata = std::map<std::string, std::string>;

/// Bytes per element of a safetensors dtype (BOOL U8 I8 F8_E4M3 F8_E5M2 I16
/// U16 F16 BF16 I32 U32 F32 I64 U64 F64), or 0 if the dtype is unknown.
size_t safetensorsDtypeSize(std::string_view dtype);
/// The safetensors dtype string of a .npy element type (`F32`, `BOOL`, ...).
const char *safetensorsDtype(DType type);
/// The .npy element type of a safetensors dtype, if Npy.h has one.
std::optional<DType> dtypeFromSafetensors(std::string_view dtype);

/// The in-memory file image. Tensors are laid out by decreasing element size
/// (then in the given order), so every tensor is aligned to its element size
/// when the file is memory-mapped; the header is padded to a multiple of 8.
/// Throws DataError (prefixed with `name`) on an unknown dtype, a data size
/// that does not match dtype x shape, a duplicate or empty name, or the
/// reserved name `__metadata__`.
std::vector<uint8_t>
serializeSafetensors(const std::vector<TensorBytes> &tensors,
                     const SafetensorsMetadata &metadata,
                     const std::string &name);

/// The same file as pieces to write one after another, without copying the
/// tensors: the 8-byte length and header (`header`), then each tensor's
/// bytes in `pieces` (pointers into `tensors`, valid while they are).
/// Validates and throws as serializeSafetensors.
struct SafetensorsLayout {
  std::vector<uint8_t> header;
  std::vector<std::pair<const uint8_t *, size_t>> pieces; ///< header first
  uint64_t totalBytes = 0;

  // pieces[0] points into `header`: a move keeps its buffer, a copy would
  // not.
  SafetensorsLayout() = default;
  SafetensorsLayout(SafetensorsLayout &&) = default;
  SafetensorsLayout &operator=(SafetensorsLayout &&) = default;
  SafetensorsLayout(const SafetensorsLayout &) = delete;
  SafetensorsLayout &operator=(const SafetensorsLayout &) = delete;
};
SafetensorsLayout layoutSafetensors(const std::vector<TensorBytes> &tensors,
                                    const SafetensorsMetadata &metadata,
                                    const std::string &name);

/// Writes `path` directly (not atomically; checkpoints use
/// writeFileAtomically from Checkpoint.h). Throws DataError.
void writeSafetensors(const std::string &path,
                      const std::vector<TensorBytes> &tensors,
                      const SafetensorsMetadata &metadata = {});

/// A parsed file: tensors in buffer order, plus the metadata.
struct SafetensorsFile {
  std::vector<TensorBytes> tensors;
  SafetensorsMetadata metadata;

  /// The tensor called `name`, or nullptr.
  const TensorBytes *find(std::string_view name) const;
};

/// Parses an in-memory image; `name` (usually the path) starts every error.
SafetensorsFile parseSafetensors(const void *bytes, size_t size,
                                 const std::string &name);

/// Reads and validates `path`. Throws DataError.
SafetensorsFile readSafetensors(const std::string &path);

namespace json {

/// A JSON value. Numbers keep their literal text so 64-bit integers survive
/// exactly; object members keep their order (duplicate keys are rejected by
/// the parser).
struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Null;
  bool boolean = false;
  std::string text; ///< String: the decoded string; Number: the literal
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> members;

  static Value string(std::string s);
  static Value number(uint64_t v);
  static Value number(int64_t v);
  static Value array();
  static Value object();

  /// Member `key` of an object, or nullptr (also for non-objects).
  const Value *get(std::string_view key) const;
  /// Appends a member to an object.
  Value &set(std::string key, Value v);
  /// A non-negative integer literal (no sign, fraction or exponent) that fits
  /// in uint64_t.
  std::optional<uint64_t> asU64() const;
  /// Compact serialization (objects in member order).
  std::string dump() const;
};

/// Parses `text` (a complete JSON document; surrounding whitespace allowed).
/// Throws DataError "<what>: malformed JSON at byte <k>: <cause>". Nesting
/// deeper than 64 levels is rejected.
Value parse(std::string_view text, const std::string &what);

/// `"..."` with JSON escapes.
std::string quote(std::string_view s);

} // namespace json

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_SAFETENSORS_H
