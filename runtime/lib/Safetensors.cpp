//===- Safetensors.cpp - Reading and writing .safetensors files -----------===//
//
// See Safetensors.h for the format. The reader is strict: anything a
// conforming writer would not produce is an error naming the file, so a
// corrupt checkpoint never loads as garbage.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

namespace varuna::rt {

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace json {

Value Value::string(std::string s) {
  Value v;
  v.kind = String;
  v.text = std::move(s);
  return v;
}
Value Value::number(uint64_t n) {
  Value v;
  v.kind = Number;
  v.text = std::to_string(n);
  return v;
}
Value Value::number(int64_t n) {
  Value v;
  v.kind = Number;
  v.text = std::to_string(n);
  return v;
}
Value Value::array() {
  Value v;
  v.kind = Array;
  return v;
}
Value Value::object() {
  Value v;
  v.kind = Object;
  return v;
}

const Value *Value::get(std::string_view key) const {
  if (kind != Object)
    return nullptr;
  for (const auto &m : members)
    if (m.first == key)
      return &m.second;
  return nullptr;
}

Value &Value::set(std::string key, Value v) {
  members.emplace_back(std::move(key), std::move(v));
  return members.back().second;
}

std::optional<uint64_t> Value::asU64() const {
  if (kind != Number || text.empty() || text.size() > 20)
    return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10)
      return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

std::string Value::dump() const {
  switch (kind) {
  case Null:
    return "null";
  case Bool:
    return boolean ? "true" : "false";
  case Number:
    return text;
  case String:
    return quote(text);
  case Array: {
    std::string s = "[";
    for (size_t i = 0; i < items.size(); ++i)
      s += (i ? "," : "") + items[i].dump();
    return s + "]";
  }
  case Object: {
    std::string s = "{";
    for (size_t i = 0; i < members.size(); ++i)
      s += (i ? "," : "") + quote(members[i].first) + ":" +
           members[i].second.dump();
    return s + "}";
  }
  }
  return "null";
}

namespace {

class Parser {
public:
  Parser(std::string_view text, const std::string &what)
      : text(text), what(what) {}

  Value document() {
    Value v = value(0);
    space();
    if (pos != text.size())
      bad("trailing characters after the JSON value");
    return v;
  }

private:
  std::string_view text;
  const std::string &what;
  size_t pos = 0;

  [[noreturn]] void bad(const std::string &cause) {
    throw DataError(what + ": malformed JSON at byte " + std::to_string(pos) +
                    ": " + cause);
  }
  void space() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }
  bool literal(std::string_view word) {
    if (text.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > 64)
      bad("nesting deeper than 64 levels");
    space();
    if (pos >= text.size())
      bad("unexpected end of input");
    char c = text[pos];
    Value v;
    if (c == '{') {
      v.kind = Value::Object;
      ++pos;
      space();
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return v;
      }
      std::set<std::string> seen;
      while (true) {
        space();
        if (pos >= text.size())
          bad("unexpected end of input");
        if (text[pos] != '"')
          bad("expected a string key");
        std::string key = str();
        if (!seen.insert(key).second)
          bad("duplicate key " + quote(key));
        space();
        if (pos >= text.size() || text[pos] != ':')
          bad("expected ':'");
        ++pos;
        v.members.emplace_back(std::move(key), value(depth + 1));
        space();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == '}') {
          ++pos;
          return v;
        }
        bad("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Value::Array;
      ++pos;
      space();
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return v;
      }
      while (true) {
        v.items.push_back(value(depth + 1));
        space();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == ']') {
          ++pos;
          return v;
        }
        bad("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = Value::String;
      v.text = str();
      return v;
    }
    if (literal("true")) {
      v.kind = Value::Bool;
      v.boolean = true;
      return v;
    }
    if (literal("false")) {
      v.kind = Value::Bool;
      return v;
    }
    if (literal("null"))
      return v;
    if (c == '-' || (c >= '0' && c <= '9'))
      return number();
    bad(std::string("unexpected character '") + c + "'");
  }

  Value number() {
    size_t start = pos;
    auto digits = [&] {
      size_t s = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos - s;
    };
    if (text[pos] == '-')
      ++pos;
    size_t intStart = pos;
    if (digits() == 0)
      bad("expected digits");
    if (text[intStart] == '0' && pos - intStart > 1)
      bad("leading zeros in a number");
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      if (digits() == 0)
        bad("expected digits after '.'");
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (digits() == 0)
        bad("expected exponent digits");
    }
    Value v;
    v.kind = Value::Number;
    v.text = std::string(text.substr(start, pos - start));
    return v;
  }

  unsigned hex4() {
    if (pos + 4 > text.size())
      bad("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        bad("bad hex digit in \\u escape");
    }
    return v;
  }

  static void utf8(std::string &out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string str() {
    ++pos; // opening quote
    std::string out;
    while (true) {
      if (pos >= text.size())
        bad("unterminated string");
      unsigned char c = static_cast<unsigned char>(text[pos++]);
      if (c == '"')
        return out;
      if (c < 0x20)
        bad("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos >= text.size())
        bad("unterminated escape");
      char e = text[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        unsigned cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00) {
          if (!literal("\\u"))
            bad("unpaired surrogate in \\u escape");
          unsigned lo = hex4();
          if (lo < 0xDC00 || lo >= 0xE000)
            bad("unpaired surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          bad("unpaired surrogate in \\u escape");
        }
        utf8(out, cp);
        break;
      }
      default:
        bad(std::string("bad escape '\\") + e + "'");
      }
    }
  }
};

} // namespace

Value parse(std::string_view text, const std::string &what) {
  return Parser(text, what).document();
}

} // namespace json

//===----------------------------------------------------------------------===//
// Dtypes
//===----------------------------------------------------------------------===//

namespace {

struct DtypeInfo {
  const char *name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8},
};

[[noreturn]] void fail(const std::string &name, const std::string &what) {
  throw DataError(name + ": " + what);
}

/// numElements with overflow detection; nullopt on overflow or negative dims.
std::optional<uint64_t> checkedElements(const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    uint64_t u = static_cast<uint64_t>(d);
    if (u != 0 && n > UINT64_MAX / u)
      return std::nullopt;
    n *= u;
  }
  return n;
}

void putLE64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

} // namespace

int64_t TensorBytes::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

size_t safetensorsDtypeSize(std::string_view dtype) {
  for (const auto &d : kDtypes)
    if (dtype == d.name)
      return d.size;
  return 0;
}

const char *safetensorsDtype(DType type) {
  switch (type) {
  case DType::F16:
    return "F16";
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  case DType::I16:
    return "I16";
  case DType::U16:
    return "U16";
  case DType::U32:
    return "U32";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::Bool:
    return "BOOL";
  }
  return "?";
}

std::optional<DType> dtypeFromSafetensors(std::string_view dtype) {
  for (DType t : {DType::F16, DType::F32, DType::F64, DType::I8, DType::U8,
                  DType::I16, DType::U16, DType::I32, DType::U32, DType::I64,
                  DType::Bool})
    if (dtype == safetensorsDtype(t))
      return t;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

SafetensorsLayout layoutSafetensors(const std::vector<TensorBytes> &tensors,
                                    const SafetensorsMetadata &metadata,
                                    const std::string &name) {
  std::set<std::string_view> names;
  for (const TensorBytes &t : tensors) {
    if (t.name.empty())
      fail(name, "a tensor has an empty name");
    if (t.name == "__metadata__")
      fail(name, "'__metadata__' is reserved and cannot name a tensor");
    if (!names.insert(t.name).second)
      fail(name, "duplicate tensor name '" + t.name + "'");
    size_t elemSize = safetensorsDtypeSize(t.dtype);
    if (elemSize == 0)
      fail(name, "tensor '" + t.name + "': unknown dtype '" + t.dtype + "'");
    std::optional<uint64_t> n = checkedElements(t.shape);
    if (!n || *n > UINT64_MAX / elemSize || *n * elemSize != t.byteSize())
      fail(name, "tensor '" + t.name + "': " + std::to_string(t.byteSize()) +
                     " bytes do not match dtype " + t.dtype + " x shape " +
                     formatShape(t.shape));
  }

  // Largest elements first keeps every tensor aligned to its element size.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return safetensorsDtypeSize(tensors[a].dtype) >
           safetensorsDtypeSize(tensors[b].dtype);
  });

  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value &meta = header.set("__metadata__", json::Value::object());
    for (const auto &[k, v] : metadata)
      meta.set(k, json::Value::string(v));
  }
  uint64_t offset = 0;
  for (size_t i : order) {
    const TensorBytes &t = tensors[i];
    json::Value entry = json::Value::object();
    entry.set("dtype", json::Value::string(t.dtype));
    json::Value shape = json::Value::array();
    for (int64_t d : t.shape)
      shape.items.push_back(json::Value::number(d));
    entry.set("shape", std::move(shape));
    json::Value offsets = json::Value::array();
    offsets.items.push_back(json::Value::number(offset));
    offset += t.byteSize();
    offsets.items.push_back(json::Value::number(offset));
    entry.set("data_offsets", std::move(offsets));
    header.set(t.name, std::move(entry));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  SafetensorsLayout out;
  out.header.resize(8 + text.size());
  putLE64(out.header.data(), text.size());
  std::memcpy(out.header.data() + 8, text.data(), text.size());
  out.pieces.push_back({out.header.data(), out.header.size()});
  for (size_t i : order)
    if (tensors[i].byteSize() > 0)
      out.pieces.push_back({tensors[i].bytes(), tensors[i].byteSize()});
  out.totalBytes = out.header.size() + offset;
  return out;
}

std::vector<uint8_t>
serializeSafetensors(const std::vector<TensorBytes> &tensors,
                     const SafetensorsMetadata &metadata,
                     const std::string &name) {
  SafetensorsLayout layout = layoutSafetensors(tensors, metadata, name);
  std::vector<uint8_t> out;
  out.reserve(layout.totalBytes);
  for (const auto &[p, n] : layout.pieces)
    out.insert(out.end(), p, p + n);
  return out;
}

void writeSafetensors(const std::string &path,
                      const std::vector<TensorBytes> &tensors,
                      const SafetensorsMetadata &metadata) {
  std::vector<uint8_t> bytes = serializeSafetensors(tensors, metadata, path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    fail(path, std::string("cannot create: ") + std::strerror(errno));
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out)
    fail(path, "write error");
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

const TensorBytes *SafetensorsFile::find(std::string_view name) const {
  for (const TensorBytes &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

SafetensorsFile parseSafetensors(const void *bytes, size_t size,
                                 const std::string &name) {
  const auto *p = static_cast<const uint8_t *>(bytes);
  if (size < 8)
    fail(name, "not a safetensors file: " + std::to_string(size) +
                   " bytes, shorter than the 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | p[i];
  if (headerLen > size - 8)
    fail(name, "header length " + std::to_string(headerLen) +
                   " exceeds the file (" + std::to_string(size) +
                   " bytes): truncated or not a safetensors file");
  if (headerLen < 2 || p[8] != '{')
    fail(name, "the header is not a JSON object (it must start with '{')");
  std::string_view text(reinterpret_cast<const char *>(p + 8), headerLen);
  json::Value header = json::parse(text, name + ": header");
  if (header.kind != json::Value::Object)
    fail(name, "the header is not a JSON object");

  SafetensorsFile out;
  struct Slot {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Slot> slots;
  uint64_t bufferSize = size - 8 - headerLen;
  for (const auto &[key, val] : header.members) {
    if (key == "__metadata__") {
      if (val.kind != json::Value::Object)
        fail(name, "'__metadata__' must be an object of strings");
      for (const auto &[mk, mv] : val.members) {
        if (mv.kind != json::Value::String)
          fail(name, "'__metadata__' value of '" + mk + "' is not a string");
        out.metadata[mk] = mv.text;
      }
      continue;
    }
    std::string where = name + ": tensor '" + key + "'";
    if (val.kind != json::Value::Object)
      throw DataError(where + ": entry is not an object");
    const json::Value *dtype = val.get("dtype");
    const json::Value *shape = val.get("shape");
    const json::Value *offsets = val.get("data_offsets");
    if (!dtype || !shape || !offsets)
      throw DataError(where + ": needs 'dtype', 'shape' and 'data_offsets'");
    if (dtype->kind != json::Value::String)
      throw DataError(where + ": 'dtype' is not a string");
    size_t elemSize = safetensorsDtypeSize(dtype->text);
    if (elemSize == 0)
      throw DataError(where + ": unknown dtype '" + dtype->text + "'");
    if (shape->kind != json::Value::Array)
      throw DataError(where + ": 'shape' is not an array");
    TensorBytes t;
    t.name = key;
    t.dtype = dtype->text;
    for (const json::Value &d : shape->items) {
      std::optional<uint64_t> v = d.asU64();
      if (!v || *v > static_cast<uint64_t>(INT64_MAX))
        throw DataError(where +
                        ": shape entries must be non-negative integers");
      t.shape.push_back(static_cast<int64_t>(*v));
    }
    if (offsets->kind != json::Value::Array || offsets->items.size() != 2)
      throw DataError(where + ": 'data_offsets' must be [begin, end]");
    std::optional<uint64_t> begin = offsets->items[0].asU64();
    std::optional<uint64_t> end = offsets->items[1].asU64();
    if (!begin || !end)
      throw DataError(where + ": 'data_offsets' must be non-negative integers");
    if (*begin > *end)
      throw DataError(where + ": data_offsets [" + std::to_string(*begin) +
                      ", " + std::to_string(*end) + "] end before they begin");
    if (*end > bufferSize)
      throw DataError(where + ": data_offsets [" + std::to_string(*begin) +
                      ", " + std::to_string(*end) +
                      "] exceed the data buffer (" +
                      std::to_string(bufferSize) + " bytes): truncated file?");
    std::optional<uint64_t> n = checkedElements(t.shape);
    if (!n || *n > UINT64_MAX / elemSize || *n * elemSize != *end - *begin)
      throw DataError(where + ": " + std::to_string(*end - *begin) +
                      " bytes in data_offsets do not match dtype " + t.dtype +
                      " x shape " + formatShape(t.shape));
    slots.push_back({*begin, *end, out.tensors.size()});
    out.tensors.push_back(std::move(t));
  }

  // The tensors must tile the buffer: sorted by offset, each begins where the
  // previous one ended, and the last one ends at the end of the file.
  std::sort(slots.begin(), slots.end(), [](const Slot &a, const Slot &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  const TensorBytes *prev = nullptr;
  for (const Slot &s : slots) {
    const TensorBytes &t = out.tensors[s.index];
    if (s.begin < expect)
      fail(name, "tensor '" + t.name + "' overlaps tensor '" + prev->name +
                     "' (data_offsets begin at " + std::to_string(s.begin) +
                     ", previous tensor ends at " + std::to_string(expect) +
                     ")");
    if (s.begin > expect)
      fail(name, "gap of " + std::to_string(s.begin - expect) +
                     " bytes before tensor '" + t.name +
                     "' in the data buffer");
    expect = s.end;
    prev = &t;
  }
  if (expect != bufferSize)
    fail(name, std::to_string(bufferSize - expect) +
                   " trailing bytes after the last tensor (data buffer is " +
                   std::to_string(bufferSize) + " bytes, tensors cover " +
                   std::to_string(expect) + ")");

  const uint8_t *buffer = p + 8 + headerLen;
  std::vector<TensorBytes> ordered;
  ordered.reserve(slots.size());
  for (const Slot &s : slots) {
    TensorBytes &t = out.tensors[s.index];
    t.data.assign(buffer + s.begin, buffer + s.end);
    ordered.push_back(std::move(t));
  }
  out.tensors = std::move(ordered);
  return out;
}

SafetensorsFile readSafetensors(const std::string &path) {
  std::vector<uint8_t> bytes = readFileBytes(path);
  return parseSafetensors(bytes.data(), bytes.size(), path);
}

} // namespace varuna::rt
