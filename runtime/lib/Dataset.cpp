//===- Dataset.cpp - Training data: .npy directories and synthetic --------===//
//
// NpyDataset reads only the .npy header when it opens a file (Npy.h's
// readNpyHeader) and then pread(2)s the rows a batch needs. SyntheticDataset
// derives every row from a counter-based hash of (seed, input name, sample
// index), so rows need no state and no order.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace varuna::rt {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

[[noreturn]] void fail(const std::string &name, const std::string &what) {
  throw DataError(name + ": " + what);
}

std::string describe(const InputSpec &spec) {
  std::string s = "[N";
  for (int64_t d : spec.sampleShape)
    s += ", " + (d < 0 ? std::string("?") : std::to_string(d));
  return std::string(dtypeName(spec.dtype)) + " " + s + "]";
}

/// An integer dtype's signedness and width (width 0: not an integer).
std::pair<bool, int> integerKind(DType t) {
  switch (t) {
  case DType::I8: return {true, 8};
  case DType::U8: return {false, 8};
  case DType::I16: return {true, 16};
  case DType::U16: return {false, 16};
  case DType::I32: return {true, 32};
  case DType::U32: return {false, 32};
  case DType::I64: return {true, 64};
  default: return {false, 0};
  }
}

/// Whether every value of a `from` file is a value of `to`: integer types
/// into wider signed ones (token ids saved as uint16 or int32 for an int64
/// input). Floats and bools are never converted.
bool widensTo(DType from, DType to) {
  auto [toSigned, toBits] = integerKind(to);
  int fromBits = integerKind(from).second;
  return toSigned && fromBits > 0 && fromBits < toBits;
}

/// The file types widensTo accepts for `to`, for messages ("int8, uint8").
std::string widerList(DType to) {
  std::string out;
  for (DType t : {DType::I8, DType::U8, DType::I16, DType::U16, DType::I32,
                  DType::U32})
    if (widensTo(t, to))
      out += (out.empty() ? "" : ", ") + std::string(dtypeName(t));
  return out.empty() ? "none" : out;
}

/// The integer of type T at `p` (any alignment); writes one.
template <class T> int64_t loadInt(const uint8_t *p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
template <class T> void storeInt(uint8_t *p, int64_t v) {
  T x = static_cast<T>(v);
  std::memcpy(p, &x, sizeof x);
}

/// Converts `n` integers of type `from` at `src` to type `to` at `dst`
/// (widensTo(from, to)).
void widenIntegers(DType from, const uint8_t *src, DType to, uint8_t *dst,
                   size_t n) {
  size_t in = dtypeSize(from), out = dtypeSize(to);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t *p = src + i * in;
    int64_t v;
    switch (from) {
    case DType::I8: v = loadInt<int8_t>(p); break;
    case DType::U8: v = loadInt<uint8_t>(p); break;
    case DType::I16: v = loadInt<int16_t>(p); break;
    case DType::U16: v = loadInt<uint16_t>(p); break;
    case DType::I32: v = loadInt<int32_t>(p); break;
    case DType::U32: v = loadInt<uint32_t>(p); break;
    default: v = loadInt<int64_t>(p);
    }
    if (out == 8)
      storeInt<int64_t>(dst + i * 8, v);
    else if (out == 4)
      storeInt<int32_t>(dst + i * 4, v);
    else
      storeInt<int16_t>(dst + i * 2, v);
  }
}

/// For a missing input file: the .npy files of `dir` no input reads
/// (" -- the directory also holds ids.npy, mask.npy, named for no input"),
/// often the same data under the names of another model's inputs.
std::string unusedFiles(const std::string &dir,
                        const std::vector<InputSpec> &specs) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (const dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() <= 4 || n.compare(n.size() - 4, 4, ".npy") != 0)
        continue;
      bool used = false;
      for (const InputSpec &s : specs)
        used |= n == s.name + ".npy";
      if (!used)
        names.push_back(n);
    }
    ::closedir(d);
  }
  if (names.empty())
    return "";
  std::sort(names.begin(), names.end());
  std::string out = " -- the directory also holds ";
  for (size_t i = 0; i < names.size() && i < 8; ++i)
    out += (i ? ", " : "") + names[i];
  if (names.size() > 8)
    out += ", ...";
  std::string inputs;
  for (const InputSpec &s : specs)
    inputs += (inputs.empty() ? "" : ", ") + s.name;
  return out + ", named for no input (the inputs: " + inputs + ")";
}

//===----------------------------------------------------------------------===//
// Synthetic values
//===----------------------------------------------------------------------===//

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001B3ull;
  return h;
}

/// IEEE binary16 from a float, round to nearest even.
uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFF;
  if (((x >> 23) & 0xFF) == 0xFF) // inf / nan
    return static_cast<uint16_t>(sign | 0x7C00 | (mant ? 0x200 : 0));
  if (exp >= 31)
    return static_cast<uint16_t>(sign | 0x7C00);
  if (exp <= 0) {
    if (exp < -10)
      return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is still correct
  return static_cast<uint16_t>(sign | half);
}

bool isFloat(DType t) {
  return t == DType::F16 || t == DType::F32 || t == DType::F64;
}

} // namespace

int64_t typeRange(DType t) {
  switch (t) {
  case DType::Bool:
    return 2;
  case DType::I8:
    return 128;
  case DType::U8:
    return 256;
  case DType::I16:
    return 32768;
  case DType::U16:
    return 65536;
  default:
    return int64_t(1) << 31;
  }
}

//===----------------------------------------------------------------------===//
// DataSource
//===----------------------------------------------------------------------===//

DataSource::~DataSource() = default;

size_t DataSource::rowBytes(size_t input) const {
  size_t n = dtypeSize(inputSpecs[input].dtype);
  for (int64_t d : inputSpecs[input].sampleShape)
    n *= static_cast<size_t>(d);
  return n;
}

void DataSource::readRows(size_t input, int64_t index, int64_t count,
                          uint8_t *dst) const {
  size_t row = rowBytes(input);
  for (int64_t i = 0; i < count; ++i)
    readRow(input, index + i, dst + static_cast<size_t>(i) * row);
}

int64_t DataSource::sampleIndex(int64_t step, int64_t M, int64_t offset,
                                int64_t j) const {
  using u128 = unsigned __int128;
  u128 n = static_cast<u128>(numSamples());
  u128 g = (static_cast<u128>(step) % n) * (static_cast<u128>(M) % n) +
           static_cast<u128>(offset) + static_cast<u128>(j);
  return static_cast<int64_t>(g % n);
}

std::vector<BatchTensor> DataSource::batch(int64_t step, int64_t M,
                                           int64_t offset, int64_t m) const {
  return batch(step, M, offset, m,
               std::vector<bool>(inputSpecs.size(), true));
}

std::vector<BatchTensor>
DataSource::batch(int64_t step, int64_t M, int64_t offset, int64_t m,
                  const std::vector<bool> &wanted) const {
  if (step < 0 || M <= 0 || m <= 0 || offset < 0 || offset > M - m)
    throw DataError("bad batch request: step " + std::to_string(step) +
                    ", global batch " + std::to_string(M) + ", slice [" +
                    std::to_string(offset) + ", " + std::to_string(offset + m) +
                    ") (need step >= 0, m > 0 and 0 <= offset, offset + m <= "
                    "global batch)");
  int64_t n = numSamples();
  std::vector<BatchTensor> out;
  out.reserve(inputSpecs.size());
  for (size_t i = 0; i < inputSpecs.size(); ++i) {
    const InputSpec &spec = inputSpecs[i];
    BatchTensor t;
    t.name = spec.name;
    t.array.dtype = spec.dtype;
    if (i < wanted.size() && !wanted[i]) {
      out.push_back(std::move(t));
      continue;
    }
    t.array.shape.push_back(m);
    t.array.shape.insert(t.array.shape.end(), spec.sampleShape.begin(),
                         spec.sampleShape.end());
    size_t row = rowBytes(i);
    t.array.data.resize(row * static_cast<size_t>(m));
    for (int64_t j = 0; j < m;) {
      int64_t g = sampleIndex(step, M, offset, j);
      int64_t run = std::min(m - j, n - g); // contiguous until the wrap
      readRows(i, g, run, t.array.data.data() + static_cast<size_t>(j) * row);
      j += run;
    }
    out.push_back(std::move(t));
  }
  return out;
}

//===----------------------------------------------------------------------===//
// NpyDataset
//===----------------------------------------------------------------------===//

std::unique_ptr<NpyDataset>
NpyDataset::open(const std::string &dir, const std::vector<InputSpec> &specs) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    fail(dir, "data directory does not exist or is unreadable: " +
                  std::string(std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    fail(dir, "--data must be a directory holding one <input>.npy per input");

  std::vector<File> files;
  std::vector<InputSpec> resolved = specs;
  int64_t samples = -1;
  size_t first = 0;
  // Closes what was opened if validation throws.
  struct Closer {
    std::vector<File> &files;
    bool armed = true;
    ~Closer() {
      if (armed)
        for (File &f : files)
          if (f.fd >= 0)
            ::close(f.fd);
    }
  } closer{files};

  for (size_t i = 0; i < specs.size(); ++i) {
    const InputSpec &spec = specs[i];
    File f;
    f.path = dir + "/" + spec.name + ".npy";
    // Not a regular file: a FIFO blocked the open forever (with the stop
    // signals blocked in this thread), a device would be read as data.
    struct stat pst;
    if (::stat(f.path.c_str(), &pst) == 0 && !S_ISREG(pst.st_mode))
      fail(f.path, S_ISDIR(pst.st_mode)
                       ? "is a directory, not a .npy file"
                       : "is not a regular file (a pipe or a device): rows "
                         "are read where they lie, so give a .npy file");
    f.fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) {
      int err = errno;
      fail(f.path, std::string(err == ENOENT ? "missing" : "cannot open") +
                       " (" + std::strerror(err) + "); expected input '" +
                       spec.name + "' as " + describe(spec) +
                       (err == ENOENT ? unusedFiles(dir, specs) : ""));
    }
    files.push_back(f);
    NpyHeader h = readNpyHeader(f.fd, f.path);
    if (h.dtype != spec.dtype && !widensTo(h.dtype, spec.dtype))
      fail(f.path, std::string("dtype is ") + dtypeName(h.dtype) +
                       ", expected " + dtypeName(spec.dtype) + " for input '" +
                       spec.name + "' (" + describe(spec) + ")" +
                       (isFloat(spec.dtype) || spec.dtype == DType::Bool
                            ? std::string(": save it with x.astype(np.") +
                                  dtypeName(spec.dtype) + ")"
                            : std::string(": integer data of a type whose "
                                          "values all fit is converted (") +
                                  widerList(spec.dtype) +
                                  "); this one needs x.astype(np." +
                                  dtypeName(spec.dtype) + ")"));
    files.back().dtype = h.dtype;
    if (h.shape.empty())
      fail(f.path, "is a 0-d array; expected input '" + spec.name + "' as " +
                       describe(spec) + " (first dimension = samples)");
    bool match = h.shape.size() == spec.sampleShape.size() + 1;
    for (size_t d = 0; match && d < spec.sampleShape.size(); ++d)
      match = spec.sampleShape[d] < 0 || spec.sampleShape[d] == h.shape[d + 1];
    if (!match)
      fail(f.path, "shape " + formatShape(h.shape) + " does not match " +
                       describe(spec) + " expected for input '" + spec.name +
                       "'");
    resolved[i].sampleShape.assign(h.shape.begin() + 1, h.shape.end());
    if (h.shape[0] == 0)
      fail(f.path, "has no samples (first dimension is 0)");
    if (samples >= 0 && h.shape[0] != samples)
      fail(f.path, "has " + std::to_string(h.shape[0]) + " samples but " +
                       files[first].path + " has " + std::to_string(samples) +
                       "; every input needs the same number of samples "
                       "(first dimension)");
    if (samples < 0)
      samples = h.shape[0];

    uint64_t want = h.dataOffset + h.dataBytes;
    struct stat fst;
    if (::fstat(f.fd, &fst) != 0)
      fail(f.path, std::string("cannot stat: ") + std::strerror(errno));
    uint64_t have = static_cast<uint64_t>(fst.st_size);
    if (have < want)
      fail(f.path, "truncated .npy data: shape " + formatShape(h.shape) +
                       " needs " + std::to_string(want) +
                       " bytes, the file has " + std::to_string(have));
    if (have > want)
      fail(f.path, "trailing bytes after the .npy data (" +
                       std::to_string(have) + " bytes, expected " +
                       std::to_string(want) + ")");
    files.back().dataOffset = h.dataOffset;
  }
  if (specs.empty())
    throw DataError(dir + ": no inputs to read");
  closer.armed = false;
  return std::unique_ptr<NpyDataset>(
      new NpyDataset(std::move(resolved), std::move(files), samples));
}

NpyDataset::~NpyDataset() {
  for (File &f : files)
    if (f.fd >= 0)
      ::close(f.fd);
}

void NpyDataset::readRows(size_t input, int64_t index, int64_t count,
                          uint8_t *dst) const {
  const File &f = files[input];
  DType want = inputSpecs[input].dtype;
  if (f.dtype != want) {
    // A narrower integer type in the file: read it, then widen.
    size_t elems = rowBytes(input) / dtypeSize(want) * static_cast<size_t>(count);
    std::vector<uint8_t> raw(elems * dtypeSize(f.dtype));
    readFileRows(input, index, count, raw.data());
    widenIntegers(f.dtype, raw.data(), want, dst, elems);
    return;
  }
  readFileRows(input, index, count, dst);
}

void NpyDataset::readFileRows(size_t input, int64_t index, int64_t count,
                              uint8_t *dst) const {
  const File &f = files[input];
  size_t row = rowBytes(input) / dtypeSize(inputSpecs[input].dtype) *
               dtypeSize(f.dtype);
  size_t left = row * static_cast<size_t>(count);
  uint64_t off = f.dataOffset + row * static_cast<uint64_t>(index);
  while (left > 0) {
    ssize_t n = ::pread(f.fd, dst, left, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      fail(f.path, std::string("read error: ") + std::strerror(errno));
    if (n == 0)
      fail(f.path, "file shrank while reading (samples " +
                       std::to_string(index) + ".." +
                       std::to_string(index + count - 1) + ")");
    dst += n;
    off += static_cast<uint64_t>(n);
    left -= static_cast<size_t>(n);
  }
}

void NpyDataset::readRow(size_t input, int64_t index, uint8_t *dst) const {
  readRows(input, index, 1, dst);
}

//===----------------------------------------------------------------------===//
// SyntheticDataset
//===----------------------------------------------------------------------===//

SyntheticDataset::SyntheticDataset(uint64_t seed, std::vector<InputSpec> specs,
                                   int64_t numSamples)
    : DataSource(std::move(specs)), seed(seed),
      samples(numSamples > 0 ? numSamples : int64_t(1) << 62) {
  if (numSamples < 0)
    throw DataError("synthetic data: negative sample count " +
                    std::to_string(numSamples));
  for (const InputSpec &spec : inputSpecs) {
    for (int64_t d : spec.sampleShape)
      if (d < 0)
        throw DataError("synthetic input '" + spec.name +
                        "': every dimension after the batch must be known (" +
                        describe(spec) + ")");
    if (!isFloat(spec.dtype) &&
        (spec.vocab < 0 || spec.vocab > typeRange(spec.dtype)))
      throw DataError("synthetic input '" + spec.name + "': vocab " +
                      std::to_string(spec.vocab) + " does not fit " +
                      dtypeName(spec.dtype) + " (at most " +
                      std::to_string(typeRange(spec.dtype)) + ")");
    nameHashes.push_back(fnv1a(spec.name));
  }
}

void SyntheticDataset::readRow(size_t input, int64_t index,
                               uint8_t *dst) const {
  const InputSpec &spec = inputSpecs[input];
  uint64_t state = mix64(mix64(mix64(seed) ^ nameHashes[input]) ^
                         static_cast<uint64_t>(index));
  auto next = [&] {
    state += 0x9E3779B97F4A7C15ull;
    return mix64(state);
  };
  size_t elems = rowBytes(input) / dtypeSize(spec.dtype);
  if (isFloat(spec.dtype)) {
    for (size_t i = 0; i < elems; ++i) {
      double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
      double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
      double z =
          std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      if (spec.dtype == DType::F64) {
        std::memcpy(dst + 8 * i, &z, 8);
      } else if (spec.dtype == DType::F32) {
        float f = static_cast<float>(z);
        std::memcpy(dst + 4 * i, &f, 4);
      } else {
        uint16_t h = toHalf(static_cast<float>(z));
        std::memcpy(dst + 2 * i, &h, 2);
      }
    }
    return;
  }
  uint64_t range = static_cast<uint64_t>(
      spec.vocab > 0 ? spec.vocab : typeRange(spec.dtype));
  size_t size = dtypeSize(spec.dtype);
  for (size_t i = 0; i < elems; ++i) {
    uint64_t v = next() % range;
    switch (spec.dtype) {
    case DType::I64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(dst + size * i, &x, 8);
      break;
    }
    case DType::I32:
    case DType::U32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(dst + size * i, &x, 4);
      break;
    }
    case DType::I16:
    case DType::U16: {
      uint16_t x = static_cast<uint16_t>(v);
      std::memcpy(dst + size * i, &x, 2);
      break;
    }
    default: // I8, U8, Bool: one byte
      dst[i] = static_cast<uint8_t>(v);
    }
  }
}

} // namespace varuna::rt
