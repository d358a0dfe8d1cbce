//===- ONNXModelFile.cpp - Parsing an ONNX file and locating weights ------===//
//
// Parses the protobuf with explicit limits (a corrupt file is an error, never
// a crash), and finds the byte offset of every initializer's raw data inside
// the file by walking the protobuf wire format, so that parameters can be
// referenced (#varuna.data) instead of copied.
//
//===----------------------------------------------------------------------===//

#include "ONNXImporterImpl.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <cstring>

using namespace mlir;
using namespace varuna;
using namespace varuna::onnx_import;
namespace pbio = google::protobuf::io;
using WFL = google::protobuf::internal::WireFormatLite;

Type onnx_import::convertElementType(MLIRContext *ctx, int32_t t) {
  Builder b(ctx);
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::UINT8:
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case onnx::TensorProto::INT8:
    return b.getIntegerType(8);
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  default:
    return {};
  }
}

const char *onnx_import::onnxTypeName(int32_t t) {
  if (onnx::TensorProto::DataType_IsValid(t))
    return onnx::TensorProto::DataType_Name(
               static_cast<onnx::TensorProto::DataType>(t))
        .c_str();
  return "INVALID";
}

LogicalResult ModelFile::load(StringRef data, StringRef displayName,
                              StringRef dir, Location loc) {
  bytes = data;
  fileName = displayName.str();
  baseDir = dir.str();
  if (data.empty())
    return emitError(loc) << "'" << displayName
                          << "' is empty: not an ONNX model";
  pbio::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(data.data()),
      static_cast<int>(std::min<size_t>(data.size(), INT32_MAX)));
  stream.SetRecursionLimit(64);
  if (!proto.ParseFromCodedStream(&stream) ||
      !stream.ConsumedEntireMessage())
    return emitError(loc) << "'" << displayName
                          << "' is not a valid ONNX model: the protobuf "
                             "could not be parsed (truncated or corrupt file?)";
  if (!proto.has_graph() || proto.graph().node_size() == 0)
    return emitError(loc) << "'" << displayName
                          << "' has no graph nodes: not an ONNX model";
  for (const auto &op : proto.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx")
      opset = op.version();
  if (opset == 0)
    return emitError(loc) << "'" << displayName
                          << "' does not import the default ONNX opset";
  if (opset < 13 || opset > 21)
    return emitError(loc) << "'" << displayName << "' uses ONNX opset "
                          << opset << "; supported opsets are 13 to 21";
  // onnx 1.23 writes IR 14 (whatever the opset); a newer version may mean
  // fields this reader does not know (onnxruntime refuses them too).
  if (proto.ir_version() > 14)
    return emitError(loc) << "'" << displayName << "' declares ONNX IR version "
                          << proto.ir_version()
                          << "; this importer reads IR versions up to 14 "
                             "(onnx 1.23's)";

  for (const auto &init : proto.graph().initializer()) {
    InitializerData d;
    d.proto = &init;
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      std::string location;
      int64_t offset = 0, length = -1;
      for (const auto &kv : init.external_data()) {
        if (kv.key() == "location")
          location = kv.value();
        else if (kv.key() == "offset" || kv.key() == "length") {
          int64_t v = 0;
          if (StringRef(kv.value()).getAsInteger(10, v) || v < 0)
            return emitError(loc)
                   << "initializer '" << init.name() << "' has a bad "
                   << kv.key() << " '" << kv.value() << "' in external_data";
          (kv.key() == "offset" ? offset : length) = v;
        }
      }
      if (location.empty() || StringRef(location).contains("..") ||
          llvm::sys::path::is_absolute(location))
        return emitError(loc) << "initializer '" << init.name()
                              << "' has an invalid external data location '"
                              << location << "'";
      SmallString<256> path(baseDir);
      llvm::sys::path::append(path, location);
      uint64_t fileSize = 0;
      if (llvm::sys::fs::file_size(path, fileSize))
        return emitError(loc) << "external data file '" << path
                              << "' of initializer '" << init.name()
                              << "' cannot be read";
      if (length < 0)
        length = static_cast<int64_t>(fileSize) - offset;
      if (offset + length > static_cast<int64_t>(fileSize))
        return emitError(loc)
               << "external data file '" << path << "' is truncated: "
               << "initializer '" << init.name() << "' needs bytes "
               << offset << " to " << offset + length << " of "
               << fileSize;
      d.file = location;
      d.offset = offset;
      d.size = length;
    } else if (init.has_raw_data()) {
      d.file = llvm::sys::path::filename(fileName).str();
      d.size = init.raw_data().size();
    }
    initializers[init.name()] = d;
  }
  return scanRawDataOffsets(data, loc);
}

const InitializerData *ModelFile::initializer(StringRef name) const {
  auto it = initializers.find(name);
  return it == initializers.end() ? nullptr : &it->second;
}

/// Walks ModelProto.graph (7) -> GraphProto.initializer (5) ->
/// TensorProto.name (8) / raw_data (9) and records where each raw_data
/// payload starts in the file.
LogicalResult ModelFile::scanRawDataOffsets(StringRef data, Location loc) {
  auto *begin = reinterpret_cast<const uint8_t *>(data.data());
  auto fail = [&]() {
    return emitError(loc) << "'" << fileName
                          << "': could not locate initializer data";
  };
  // Finds length-delimited field `field` entries within [start, end).
  auto forEachField = [&](int64_t start, int64_t end, int field,
                          auto &&fn) -> bool {
    pbio::CodedInputStream s(begin + start, static_cast<int>(end - start));
    while (true) {
      uint32_t tag = s.ReadTag();
      if (tag == 0)
        return true;
      int number = WFL::GetTagFieldNumber(tag);
      auto type = WFL::GetTagWireType(tag);
      if (type == WFL::WIRETYPE_LENGTH_DELIMITED) {
        uint32_t len;
        if (!s.ReadVarint32(&len))
          return false;
        int64_t at = start + s.CurrentPosition();
        if (at + len > end)
          return false;
        if (number == field)
          fn(at, at + len);
        if (!s.Skip(len))
          return false;
      } else if (!WFL::SkipField(&s, tag)) {
        return false;
      }
    }
  };
  bool ok = forEachField(0, data.size(), 7, [&](int64_t gs, int64_t ge) {
    forEachField(gs, ge, 5, [&](int64_t ts, int64_t te) {
      int64_t rawAt = -1;
      std::string name;
      forEachField(ts, te, 8, [&](int64_t ns, int64_t ne) {
        name.assign(data.data() + ns, ne - ns);
      });
      forEachField(ts, te, 9, [&](int64_t rs, int64_t) { rawAt = rs; });
      auto it = initializers.find(name);
      if (rawAt >= 0 && it != initializers.end() &&
          it->second.proto->data_location() != onnx::TensorProto::EXTERNAL)
        it->second.offset = rawAt;
    });
  });
  if (!ok)
    return fail();
  return success();
}

FailureOr<KnownTensor> ModelFile::readKnown(const InitializerData &data,
                                            Type elementType,
                                            Location loc) const {
  const onnx::TensorProto &t = *data.proto;
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if (n > kMaxKnownElements)
    return emitError(loc) << "constant '" << t.name() << "' has " << n
                          << " elements, too many to evaluate at import time",
           failure();
  std::string raw;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    SmallString<256> path(baseDir);
    llvm::sys::path::append(path, data.file);
    auto buf = llvm::MemoryBuffer::getFileSlice(path, data.size, data.offset);
    if (!buf)
      return emitError(loc) << "cannot read external data of '" << t.name()
                            << "' from '" << path << "'",
             failure();
    raw = (*buf)->getBuffer().str();
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
  }
  int64_t eltBytes = (elementType.getIntOrFloatBitWidth() + 7) / 8;
  bool fromRaw = !raw.empty() || (n == 0);
  if (fromRaw && static_cast<int64_t>(raw.size()) != n * eltBytes)
    return emitError(loc) << "initializer '" << t.name() << "' has "
                          << raw.size() << " bytes of data for " << n
                          << " elements of " << eltBytes << " bytes",
           failure();
  auto rawAt = [&](int64_t i, auto zero) {
    decltype(zero) v;
    std::memcpy(&v, raw.data() + i * sizeof(v), sizeof(v));
    return v;
  };
  std::vector<SymInt> ints;
  std::vector<double> floats;
  auto checkCount = [&](int64_t have) -> LogicalResult {
    if (have != n)
      return emitError(loc) << "initializer '" << t.name() << "' has " << have
                            << " values for " << n << " elements";
    return success();
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    if (!fromRaw && failed(checkCount(t.float_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      floats.push_back(fromRaw ? rawAt(i, 0.0f) : t.float_data(i));
    return KnownTensor::ofFloats(elementType, shape, floats);
  case onnx::TensorProto::DOUBLE:
    if (!fromRaw && failed(checkCount(t.double_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      floats.push_back(fromRaw ? rawAt(i, 0.0) : t.double_data(i));
    return KnownTensor::ofFloats(elementType, shape, floats);
  case onnx::TensorProto::INT64:
    if (!fromRaw && failed(checkCount(t.int64_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      ints.push_back(fromRaw ? rawAt(i, int64_t(0)) : t.int64_data(i));
    return KnownTensor::ofInts(elementType, shape, ints);
  case onnx::TensorProto::INT32:
    if (!fromRaw && failed(checkCount(t.int32_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      ints.push_back(fromRaw ? rawAt(i, int32_t(0)) : t.int32_data(i));
    return KnownTensor::ofInts(elementType, shape, ints);
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    // 16-bit floats (a model exported with .to(torch.bfloat16): its GELU's
    // constants): their bits, raw or in int32_data, widened exactly.
    if (!fromRaw && failed(checkCount(t.int32_data_size())))
      return failure();
    const llvm::fltSemantics &sem = t.data_type() == onnx::TensorProto::BFLOAT16
                                        ? llvm::APFloat::BFloat()
                                        : llvm::APFloat::IEEEhalf();
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits = fromRaw ? rawAt(i, uint16_t(0))
                              : static_cast<uint16_t>(t.int32_data(i));
      llvm::APFloat v(sem, llvm::APInt(16, bits));
      bool lost = false;
      v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
                &lost);
      floats.push_back(v.convertToDouble());
    }
    return KnownTensor::ofFloats(elementType, shape, floats);
  }
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT8:
    if (!fromRaw && failed(checkCount(t.int32_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = fromRaw ? (t.data_type() == onnx::TensorProto::INT8
                                 ? int64_t(rawAt(i, int8_t(0)))
                                 : int64_t(rawAt(i, uint8_t(0))))
                          : t.int32_data(i);
      ints.push_back(v);
    }
    return KnownTensor::ofInts(elementType, shape, ints);
  default:
    return emitError(loc) << (t.name().empty()
                                  ? std::string("a constant")
                                  : "initializer '" + t.name() + "'")
                          << " of type " << onnxTypeName(t.data_type())
                          << " cannot be evaluated at import time",
           failure();
  }
}
