//===- ParamData.cpp - Reading parameters' initial bytes ------------------===//

#include "varuna/runtime/ParamData.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace varuna::rt {

namespace {

std::string range(int64_t offset, int64_t size) {
  return "bytes [" + std::to_string(offset) + ", " +
         std::to_string(offset + size) + ")";
}

/// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

std::string resolveDataPath(const std::string &baseDir,
                            const std::string &file) {
  if (baseDir.empty() || (!file.empty() && file[0] == '/'))
    return file;
  if (baseDir.back() == '/')
    return baseDir + file;
  return baseDir + "/" + file;
}

void readParamBytes(const std::string &baseDir, const std::string &file,
                    int64_t offset, int64_t size, void *dst) {
  std::string path = resolveDataPath(baseDir, file);
  if (offset < 0 || size < 0)
    throw DataError(path + ": invalid byte range (offset " +
                    std::to_string(offset) + ", size " + std::to_string(size) +
                    ")");
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0)
    throw DataError(path + ": cannot open weight file: " +
                    std::strerror(errno));
  struct stat st;
  if (::fstat(f.fd, &st) != 0)
    throw DataError(path + ": cannot stat weight file: " +
                    std::strerror(errno));
  if (st.st_size < offset + size)
    throw DataError(path + ": weight file is too short: it has " +
                    std::to_string(st.st_size) + " bytes, the parameter is " +
                    range(offset, size) + " (truncated or wrong file?)");
  auto *out = static_cast<char *>(dst);
  int64_t done = 0;
  constexpr int64_t kChunk = int64_t(1) << 30; // pread caps single reads anyway
  while (done < size) {
    size_t want = static_cast<size_t>(std::min(kChunk, size - done));
    ssize_t got = ::pread(f.fd, out + done, want, offset + done);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      throw DataError(path + ": read error at byte " +
                      std::to_string(offset + done) + ": " +
                      std::strerror(errno));
    }
    if (got == 0)
      throw DataError(path + ": unexpected end of file at byte " +
                      std::to_string(offset + done) + " while reading " +
                      range(offset, size));
    done += got;
  }
}

static constexpr int64_t kDigestPart = 4096;

uint32_t paramDigest(const void *bytes, int64_t size) {
  const auto *p = static_cast<const Bytef *>(bytes);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  if (size <= 2 * kDigestPart)
    return static_cast<uint32_t>(::crc32(crc, p, static_cast<uInt>(size)));
  crc = ::crc32(crc, p, kDigestPart);
  return static_cast<uint32_t>(
      ::crc32(crc, p + size - kDigestPart, kDigestPart));
}

uint32_t fileParamDigest(const std::string &baseDir, const std::string &file,
                         int64_t offset, int64_t size) {
  if (size <= 2 * kDigestPart)
    return paramDigest(readParamBytes(baseDir, file, offset, size).data(),
                       size);
  // The head and tail, as paramDigest reads them from the whole buffer.
  std::vector<uint8_t> parts(2 * kDigestPart);
  readParamBytes(baseDir, file, offset, kDigestPart, parts.data());
  readParamBytes(baseDir, file, offset + size - kDigestPart, kDigestPart,
                 parts.data() + kDigestPart);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  return static_cast<uint32_t>(
      ::crc32(crc, parts.data(), static_cast<uInt>(parts.size())));
}

bool fileParamDigest(const std::string &baseDir, const std::string &file,
                     int64_t offset, int64_t size, uint32_t &digest,
                     std::string &error) noexcept {
  try {
    digest = fileParamDigest(baseDir, file, offset, size);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

std::vector<uint8_t> readParamBytes(const std::string &baseDir,
                                    const std::string &file, int64_t offset,
                                    int64_t size) {
  std::vector<uint8_t> out(static_cast<size_t>(std::max<int64_t>(size, 0)));
  readParamBytes(baseDir, file, offset, size, out.data());
  return out;
}

} // namespace varuna::rt
