//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// Format (numpy/lib/format.py): "\x93NUMPY", major, minor, header length
// (uint16 LE for 1.0, uint32 LE for 2.0/3.0), then an ASCII (3.0: UTF-8)
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline, then the data.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <map>
#include <sstream>

namespace varuna::rt {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string &name, const std::string &what) {
  throw DataError(name + ": " + what);
}

bool hostIsLittleEndian() {
  uint16_t one = 1;
  uint8_t b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

/// A tiny parser for the header's Python dict literal. Values are strings,
/// booleans or tuples of non-negative integers; that is all numpy writes.
struct HeaderValue {
  enum Kind { Str, Bool, Tuple } kind = Str;
  std::string str;
  bool boolean = false;
  std::vector<int64_t> tuple;
};

class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::string &name)
      : text(text), name(name) {}

  std::map<std::string, HeaderValue> parseDict() {
    std::map<std::string, HeaderValue> out;
    expect('{');
    while (true) {
      skipSpace();
      if (peek() == '}') {
        ++pos;
        return out;
      }
      std::string key = parseString();
      expect(':');
      out[key] = parseValue();
      skipSpace();
      if (peek() == ',') {
        ++pos;
        continue;
      }
      expect('}');
      return out;
    }
  }

private:
  std::string_view text;
  const std::string &name;
  size_t pos = 0;

  [[noreturn]] void bad(const std::string &what) {
    fail(name, "malformed .npy header (" + what + " at offset " +
                   std::to_string(pos) + "): " + std::string(text));
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }
  char peek() {
    skipSpace();
    return pos < text.size() ? text[pos] : '\0';
  }
  /// At a '[' that opens a list of tuples: a structured dtype's fields.
  bool startsFieldList() {
    size_t keep = pos++;
    bool fields = peek() == '(';
    pos = keep;
    return fields;
  }
  void expect(char c) {
    if (peek() != c)
      bad(std::string("expected '") + c + "'");
    ++pos;
  }
  std::string parseString() {
    char q = peek();
    if (q != '\'' && q != '"')
      bad("expected a string");
    size_t end = text.find(q, pos + 1);
    if (end == std::string_view::npos)
      bad("unterminated string");
    std::string s(text.substr(pos + 1, end - pos - 1));
    pos = end + 1;
    return s;
  }
  int64_t parseInt() {
    skipSpace();
    size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
      ++pos;
    if (start == pos)
      bad("expected a non-negative integer");
    int64_t v = 0;
    for (size_t i = start; i < pos; ++i)
      if (__builtin_mul_overflow(v, int64_t(10), &v) ||
          __builtin_add_overflow(v, int64_t(text[i] - '0'), &v))
        bad("dimension too large");
    // numpy may write Python 2 longs as "3L".
    if (pos < text.size() && text[pos] == 'L')
      ++pos;
    return v;
  }
  HeaderValue parseValue() {
    HeaderValue v;
    char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = HeaderValue::Str;
      v.str = parseString();
    } else if (text.substr(pos, 4) == "True") {
      v.kind = HeaderValue::Bool;
      v.boolean = true;
      pos += 4;
    } else if (text.substr(pos, 5) == "False") {
      v.kind = HeaderValue::Bool;
      pos += 5;
    } else if (c == '[' && startsFieldList()) {
      bad("a list of fields: structured dtypes are not supported, save each "
          "field as its own array");
    } else if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      ++pos;
      v.kind = HeaderValue::Tuple;
      while (peek() != close) {
        v.tuple.push_back(parseInt());
        if (peek() == ',')
          ++pos;
        else if (peek() != close)
          bad("expected ',' or '" + std::string(1, close) + "'");
      }
      ++pos;
    } else {
      bad("unsupported value (structured dtypes are not supported)");
    }
    return v;
  }
};

uint32_t readLE(const uint8_t *p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

/// Where a .npy file's header dict lies.
struct Preamble {
  size_t dictOffset;
  size_t dictLen;
};

/// The magic, version and header length among the first `n` bytes of a file
/// (at least the 12 a preamble can take, or the whole file if shorter).
Preamble parsePreamble(const uint8_t *p, size_t n, const std::string &name) {
  if (n == 0)
    fail(name, "is empty, not a .npy file");
  if (n >= 4 && std::memcmp(p, "PK\x03\x04", 4) == 0)
    fail(name, "is a zip archive (an .npz?), not a .npy file: save each "
               "array with np.save");
  if (n < kMagicLen + 2 || std::memcmp(p, kMagic, kMagicLen) != 0)
    fail(name, "not a .npy file (bad magic; expected \"\\x93NUMPY\")");
  int major = p[6], minor = p[7];
  size_t lenBytes;
  if (major == 1)
    lenBytes = 2;
  else if (major == 2 || major == 3)
    lenBytes = 4;
  else
    fail(name, "unsupported .npy format version " + std::to_string(major) +
                   "." + std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t pre = kMagicLen + 2 + lenBytes;
  if (n < pre)
    fail(name, "truncated .npy file (" + std::to_string(n) +
                   " bytes: the header length is missing)");
  size_t len = readLE(p + kMagicLen + 2, static_cast<int>(lenBytes));
  if (len > (size_t(1) << 24))
    fail(name, "implausible .npy header length " + std::to_string(len));
  return {pre, len};
}

/// The header's fields from its dict (numpy's rules: a repeated key's last
/// value counts).
NpyHeader parseDict(std::string_view header, const Preamble &pre,
                    const std::string &name) {
  auto dict = HeaderParser(header, name).parseDict();
  auto descrIt = dict.find("descr");
  auto orderIt = dict.find("fortran_order");
  auto shapeIt = dict.find("shape");
  if (descrIt == dict.end() || orderIt == dict.end() || shapeIt == dict.end())
    fail(name, "malformed .npy header (needs 'descr', 'fortran_order' and "
               "'shape'): " + std::string(header));
  if (descrIt->second.kind != HeaderValue::Str ||
      orderIt->second.kind != HeaderValue::Bool ||
      shapeIt->second.kind != HeaderValue::Tuple)
    fail(name, "malformed .npy header: " + std::string(header));

  NpyHeader out;
  std::optional<DType> dtype = parseDtypeDescr(descrIt->second.str);
  if (!dtype)
    fail(name, "unsupported dtype '" + descrIt->second.str +
                   "' (supported: little-endian f2 f4 f8 i1 u1 i2 u2 i4 u4 i8 b1)");
  out.dtype = *dtype;
  out.shape = shapeIt->second.tuple;
  if (orderIt->second.boolean && out.shape.size() > 1)
    fail(name, "Fortran-order arrays are not supported (save a C-order "
               "array: np.ascontiguousarray)");
  out.dataOffset = pre.dictOffset + pre.dictLen;
  // Checked for overflow: a damaged header's 2^57 rows wrapped to the
  // file's size.
  uint64_t bytes = dtypeSize(out.dtype);
  bool overflow = false;
  for (int64_t d : out.shape)
    overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  if (overflow || bytes > (uint64_t(1) << 62))
    fail(name, "shape " + formatShape(out.shape) +
                   " is too large: its data would take more than 2^62 bytes "
                   "(a damaged header?)");
  out.dataBytes = bytes;
  return out;
}

} // namespace

size_t dtypeSize(DType type) {
  switch (type) {
  case DType::F16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeDescr(DType type) {
  switch (type) {
  case DType::F16:
    return "<f2";
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I8:
    return "|i1";
  case DType::U8:
    return "|u1";
  case DType::I16:
    return "<i2";
  case DType::U16:
    return "<u2";
  case DType::I32:
    return "<i4";
  case DType::U32:
    return "<u4";
  case DType::I64:
    return "<i8";
  case DType::Bool:
    return "|b1";
  }
  return "?";
}

const char *dtypeName(DType type) {
  switch (type) {
  case DType::F16:
    return "float16";
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  case DType::I8:
    return "int8";
  case DType::U8:
    return "uint8";
  case DType::I16:
    return "int16";
  case DType::U16:
    return "uint16";
  case DType::I32:
    return "int32";
  case DType::U32:
    return "uint32";
  case DType::I64:
    return "int64";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

std::optional<DType> parseDtypeDescr(std::string_view descr) {
  if (descr.size() < 2)
    return std::nullopt;
  char order = descr[0];
  std::string_view code = descr.substr(1);
  bool oneByte = code == "i1" || code == "u1" || code == "b1";
  bool little = order == '<' || (order == '=' && hostIsLittleEndian());
  if (!(little || (oneByte && (order == '|' || order == '>' || order == '='))))
    return std::nullopt;
  if (code == "f2")
    return DType::F16;
  if (code == "f4")
    return DType::F32;
  if (code == "f8")
    return DType::F64;
  if (code == "i1")
    return DType::I8;
  if (code == "u1")
    return DType::U8;
  if (code == "i2")
    return DType::I16;
  if (code == "u2")
    return DType::U16;
  if (code == "i4")
    return DType::I32;
  if (code == "u4")
    return DType::U32;
  if (code == "i8")
    return DType::I64;
  if (code == "b1")
    return DType::Bool;
  return std::nullopt;
}

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

NpyArray parseNpy(const void *bytes, size_t size, const std::string &name) {
  const auto *p = static_cast<const uint8_t *>(bytes);
  Preamble pre = parsePreamble(p, size, name);
  if (size < pre.dictOffset + pre.dictLen)
    fail(name, "truncated .npy header (file has " + std::to_string(size) +
                   " bytes, header ends at byte " +
                   std::to_string(pre.dictOffset + pre.dictLen) + ")");
  std::string_view dict(reinterpret_cast<const char *>(p + pre.dictOffset),
                        pre.dictLen);
  NpyHeader h = parseDict(dict, pre, name);
  uint64_t have = size - h.dataOffset;
  if (have < h.dataBytes)
    fail(name, "truncated .npy data: shape " + formatShape(h.shape) + " of " +
                   dtypeName(h.dtype) + " needs " +
                   std::to_string(h.dataBytes) + " bytes, the file has " +
                   std::to_string(have));
  if (have > h.dataBytes)
    fail(name, "trailing bytes after the .npy data (" + std::to_string(have) +
                   " bytes, expected " + std::to_string(h.dataBytes) + ")");
  NpyArray out;
  out.dtype = h.dtype;
  out.shape = std::move(h.shape);
  const uint8_t *data = p + h.dataOffset;
  out.data.assign(data, data + h.dataBytes);
  return out;
}

NpyHeader readNpyHeader(int fd, const std::string &path) {
  uint8_t head[12];
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  if (n < 0)
    fail(path, std::string("cannot read: ") + std::strerror(errno));
  Preamble pre = parsePreamble(head, static_cast<size_t>(n), path);
  std::string dict(pre.dictLen, '\0');
  if (::pread(fd, dict.data(), pre.dictLen,
              static_cast<off_t>(pre.dictOffset)) !=
      static_cast<ssize_t>(pre.dictLen))
    fail(path, "truncated .npy header");
  return parseDict(dict, pre, path);
}

std::vector<uint8_t> readFileBytes(const std::string &path) {
  // libstdc++ throws its own exception reading a directory: said here.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail(path, "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad())
    fail(path, "read error");
  return bytes;
}

NpyArray readNpy(const std::string &path) {
  std::vector<uint8_t> bytes = readFileBytes(path);
  return parseNpy(bytes.data(), bytes.size(), path);
}

void writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data) {
  std::string dict = std::string("{'descr': '") + dtypeDescr(dtype) +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }"; // a 1-tuple is "(3,)"
  // Total header (magic + version + length + dict + '\n') is a multiple of 64.
  int major = 1;
  size_t pre = kMagicLen + 2 + 2;
  size_t total = (pre + dict.size() + 1 + 63) / 64 * 64;
  if (total - pre > 0xffff) {
    major = 2;
    pre = kMagicLen + 2 + 4;
    total = (pre + dict.size() + 1 + 63) / 64 * 64;
  }
  dict.append(total - pre - dict.size() - 1, ' ');
  dict += '\n';

  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    fail(path, std::string("cannot create: ") + std::strerror(errno));
  out.write(kMagic, kMagicLen);
  char version[2] = {static_cast<char>(major), 0};
  out.write(version, 2);
  uint32_t len = static_cast<uint32_t>(dict.size());
  char lenBytes[4] = {static_cast<char>(len & 0xff),
                      static_cast<char>((len >> 8) & 0xff),
                      static_cast<char>((len >> 16) & 0xff),
                      static_cast<char>((len >> 24) & 0xff)};
  out.write(lenBytes, major == 1 ? 2 : 4);
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(static_cast<const char *>(data),
            static_cast<std::streamsize>(n * dtypeSize(dtype)));
  if (!out)
    fail(path, "write error");
}

void writeNpy(const std::string &path, const NpyArray &array) {
  if (array.data.size() !=
      static_cast<size_t>(array.numElements()) * dtypeSize(array.dtype))
    fail(path, "array data size does not match its shape and dtype");
  writeNpy(path, array.dtype, array.shape, array.data.data());
}

} // namespace varuna::rt
