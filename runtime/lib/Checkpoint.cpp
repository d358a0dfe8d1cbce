//===- Checkpoint.cpp - Atomic, verifiable training checkpoints -----------===//
//
// Write order for step N (each file atomic, see writeFileAtomically):
//   1. remove a stale step-N/COMPLETE (a previous attempt at the same step),
//   2. section-<k>.safetensors, by whichever ranks own the sections,
//   3. manifest.json (sizes + CRC32 of every section file, training state),
//   4. COMPLETE, naming the manifest's CRC32.
// A reader trusts a directory only if all four check out.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Checkpoint.h"

#include <cstdio>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace fs = std::filesystem;

namespace varuna::rt {

namespace {

constexpr const char *kManifest = "manifest.json";
constexpr const char *kComplete = "COMPLETE";
constexpr const char *kFormat = "varuna-checkpoint";
constexpr int kVersion = 1;

std::string errnoText(int err) { return std::strerror(err); }

std::string join(const std::string &dir, const std::string &name) {
  return (fs::path(dir) / name).string();
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

/// fsync a directory so renames and creations in it are durable.
std::string syncDir(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return "cannot open directory '" + dir +
           "' to fsync it: " + errnoText(errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) // some filesystems cannot fsync directories
    return "cannot fsync directory '" + dir + "': " + errnoText(err);
  return "";
}

/// mkdir -p, fsyncing the parent of every directory created.
std::string makeDirs(const std::string &dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    return "";
  fs::path p(dir);
  if (p.has_parent_path() && p.parent_path() != p) {
    std::string err = makeDirs(p.parent_path().string());
    if (!err.empty())
      return err;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return "cannot create checkpoint directory '" + dir +
           "': " + errnoText(errno);
  if (!fs::is_directory(dir, ec))
    return "cannot create checkpoint directory '" + dir +
           "': a file of that name exists";
  std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
  return syncDir(parent.empty() ? "." : parent);
}

/// Reads a whole file; nullopt and `*err` on failure.
std::optional<std::vector<uint8_t>> readAll(const std::string &path,
                                            std::string *err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errnoText(errno);
    return std::nullopt;
  }
  // Read straight into a buffer of the file's size (a section file is as
  // large as its stage's state: no 64 KB steps into a growing copy), and
  // on past it if the file grew meanwhile.
  std::vector<uint8_t> out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    out.resize(static_cast<size_t>(st.st_size));
  size_t have = 0;
  uint8_t more[1 << 16]; // past the expected size (or a size unknown)
  while (true) {
    bool full = have == out.size();
    ssize_t n = full ? ::read(fd, more, sizeof(more))
                     : ::read(fd, out.data() + have,
                              std::min<size_t>(out.size() - have,
                                               size_t(1) << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      *err = errnoText(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0)
      break;
    if (full)
      out.insert(out.end(), more, more + n);
    have += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(have);
  return out;
}

/// Size and CRC32 of a file, read in 1 MiB chunks.
std::string fileSizeAndCrc(const std::string &path, uint64_t *size,
                           uint32_t *crc) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errnoText(errno);
  std::vector<uint8_t> buf(1 << 20);
  uint32_t c = 0;
  uint64_t total = 0;
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return errnoText(err);
    }
    if (n == 0)
      break;
    c = crc32Of(buf.data(), static_cast<size_t>(n), c);
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  *size = total;
  *crc = c;
  return "";
}

std::string completeMarkerText(int64_t step, uint32_t manifestCrc) {
  return std::string(kFormat) + " step=" + std::to_string(step) +
         " manifest-crc32=" + hex32(manifestCrc) + "\n";
}

std::string manifestText(int64_t step, const std::vector<CheckpointFile> &files,
                         const TrainingState &state) {
  std::string s = "{\n";
  s += "  \"format\": " + json::quote(kFormat) + ",\n";
  s += "  \"version\": " + std::to_string(kVersion) + ",\n";
  s += "  \"step\": " + std::to_string(step) + ",\n";
  s += "  \"files\": [";
  for (size_t i = 0; i < files.size(); ++i) {
    const CheckpointFile &f = files[i];
    s += i ? ",\n    " : "\n    ";
    s += "{\"name\": " + json::quote(f.name) +
         ", \"section\": " + std::to_string(f.section) +
         ", \"bytes\": " + std::to_string(f.bytes) +
         ", \"crc32\": " + std::to_string(f.crc32) + "}";
  }
  s += files.empty() ? "],\n" : "\n  ],\n";
  s += "  \"state\": {";
  size_t i = 0;
  for (const auto &[k, v] : state)
    s += (i++ ? ",\n    " : "\n    ") + json::quote(k) + ": " + json::quote(v);
  s += state.empty() ? "}\n" : "\n  }\n";
  return s + "}\n";
}

/// Parses manifest.json; "" on success, else the cause.
std::string parseManifest(const std::vector<uint8_t> &bytes,
                          const std::string &path, CheckpointManifest *out) {
  json::Value doc;
  try {
    doc = json::parse(
        std::string_view(reinterpret_cast<const char *>(bytes.data()),
                         bytes.size()),
        path);
  } catch (const DataError &e) {
    return e.what();
  }
  auto bad = [&](const std::string &what) { return path + ": " + what; };
  const json::Value *format = doc.get("format");
  if (!format || format->kind != json::Value::String || format->text != kFormat)
    return bad("not a varuna checkpoint manifest (\"format\" is not \"" +
               std::string(kFormat) + "\")");
  const json::Value *version = doc.get("version");
  if (!version || version->asU64() != std::optional<uint64_t>(kVersion))
    return bad("unsupported manifest version (this build reads version " +
               std::to_string(kVersion) + ")");
  const json::Value *step = doc.get("step");
  if (!step || !step->asU64() || *step->asU64() > INT64_MAX)
    return bad("\"step\" is not a non-negative integer");
  out->step = static_cast<int64_t>(*step->asU64());
  const json::Value *files = doc.get("files");
  if (!files || files->kind != json::Value::Array)
    return bad("\"files\" is not an array");
  for (const json::Value &f : files->items) {
    const json::Value *name = f.get("name");
    const json::Value *section = f.get("section");
    const json::Value *size = f.get("bytes");
    const json::Value *crc = f.get("crc32");
    if (!name || name->kind != json::Value::String || name->text.empty() ||
        name->text.find('/') != std::string::npos || name->text[0] == '.')
      return bad("a file entry has no valid \"name\"");
    if (!size || !size->asU64() || !crc || !crc->asU64() ||
        *crc->asU64() > UINT32_MAX)
      return bad("file entry '" + name->text +
                 "' needs integer \"bytes\" and \"crc32\"");
    CheckpointFile entry;
    entry.name = name->text;
    entry.bytes = *size->asU64();
    entry.crc32 = static_cast<uint32_t>(*crc->asU64());
    if (section && section->kind == json::Value::Number) {
      if (section->text == "-1")
        entry.section = -1;
      else if (section->asU64() && *section->asU64() < INT32_MAX)
        entry.section = static_cast<int>(*section->asU64());
      else
        return bad("file entry '" + name->text + "' has a bad \"section\"");
    }
    out->files.push_back(entry);
  }
  if (const json::Value *state = doc.get("state")) {
    if (state->kind != json::Value::Object)
      return bad("\"state\" is not an object");
    for (const auto &[k, v] : state->members) {
      if (v.kind != json::Value::String)
        return bad("state value '" + k + "' is not a string");
      out->state[k] = v.text;
    }
  }
  return "";
}

/// Step directories of `ckptDir`, newest first. Only names that
/// checkpointStepDirName produces (no sign, no leading zeros) count.
std::string listSteps(const std::string &ckptDir,
                      std::vector<std::pair<int64_t, std::string>> *steps) {
  std::error_code ec;
  if (!fs::exists(ckptDir, ec))
    return "";
  fs::directory_iterator it(ckptDir, ec);
  if (ec)
    return "cannot list checkpoint directory '" + ckptDir +
           "': " + ec.message();
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec)
      return "cannot list checkpoint directory '" + ckptDir +
             "': " + ec.message();
    std::string name = it->path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 23)
      continue;
    std::string digits = name.substr(5);
    if (!std::all_of(digits.begin(), digits.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) ||
        (digits.size() > 1 && digits[0] == '0'))
      continue;
    uint64_t v = std::stoull(digits);
    if (v > INT64_MAX || !it->is_directory(ec))
      continue;
    steps->emplace_back(static_cast<int64_t>(v), it->path().string());
  }
  std::sort(steps->begin(), steps->end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  return "";
}

std::string removeStepDir(const std::string &stepDir) {
  std::string marker = join(stepDir, kComplete);
  if (::unlink(marker.c_str()) == 0) {
    std::string err = syncDir(stepDir);
    if (!err.empty())
      return err;
  } else if (errno != ENOENT) {
    return "cannot remove '" + marker + "': " + errnoText(errno);
  }
  std::error_code ec;
  fs::remove_all(stepDir, ec);
  if (ec)
    return "cannot remove '" + stepDir + "': " + ec.message();
  return "";
}

/// Removes what earlier writers left in a complete step directory: the
/// temporary files of killed ones (writeFileAtomically's
/// `.<name>.tmp.<pid>.<n>`), and section files its manifest does not list
/// (a torn write of the step with more sections, written again with
/// fewer). Once its marker is written no writer of the step is left, so
/// any such file is garbage. Best effort: a file that cannot be removed
/// stays.
void removeLeftovers(const std::string &stepDir,
                     const std::vector<CheckpointFile> &listed) {
  std::set<std::string> names;
  for (const CheckpointFile &f : listed)
    names.insert(f.name);
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(stepDir, ec)) {
    std::string name = e.path().filename().string();
    const std::string pre = "section-", post = ".safetensors";
    bool sectionFile =
        name.size() > pre.size() + post.size() &&
        name.compare(0, pre.size(), pre) == 0 &&
        name.compare(name.size() - post.size(), post.size(), post) == 0 &&
        name.find_first_not_of("0123456789", pre.size()) ==
            name.size() - post.size();
    if ((name.size() > 1 && name[0] == '.' &&
         name.find(".tmp.") != std::string::npos) ||
        (sectionFile && !names.count(name)))
      fs::remove(e.path(), ec);
  }
}

} // namespace

const CheckpointFile *CheckpointInfo::sectionFile(int k) const {
  for (const CheckpointFile &f : manifest.files)
    if (f.section == k)
      return &f;
  return nullptr;
}

std::string checkpointStepDirName(int64_t step) {
  return "step-" + std::to_string(step);
}

std::string checkpointSectionFileName(int section) {
  return "section-" + std::to_string(section) + ".safetensors";
}

std::string optimizerStateTensorName(const std::string &param,
                                     const std::string &state) {
  return "optimizer/" + state + "/" + param;
}

std::string frozenTensorName(const std::string &param) {
  return "frozen/" + param;
}

uint32_t crc32Of(const void *data, size_t size, uint32_t crc) {
  const auto *p = static_cast<const Bytef *>(data);
  uLong c = crc;
  while (size > 0) {
    uInt chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    c = ::crc32(c, p, chunk);
    p += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(c);
}

std::string writeFileAtomically(const std::string &dir, const std::string &name,
                                const void *data, size_t size) {
  return writeFileAtomically(
      dir, name, {{static_cast<const uint8_t *>(data), size}});
}

std::string writeFileAtomically(
    const std::string &dir, const std::string &name,
    const std::vector<std::pair<const uint8_t *, size_t>> &pieces) {
  static std::atomic<unsigned> counter{0};
  std::string target = join(dir, name);
  std::string tmp =
      join(dir, "." + name + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter++));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot create '" + tmp + "' (for '" + target +
           "'): " + errnoText(errno);
  auto abandon = [&](const std::string &what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return "cannot " + what + " '" + tmp + "' (for '" + target +
           "'): " + errnoText(err);
  };
  for (auto [p, left] : pieces)
    while (left > 0) {
      ssize_t n = ::write(fd, p, std::min<size_t>(left, 1u << 30));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return abandon("write", errno);
      p += n;
      left -= static_cast<size_t>(n);
    }
  if (::fsync(fd) != 0)
    return abandon("fsync", errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return "cannot close '" + tmp + "' (for '" + target +
           "'): " + errnoText(err);
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return "cannot rename '" + tmp + "' to '" + target + "': " + errnoText(err);
  }
  return syncDir(dir);
}

std::string writeCheckpointSection(const std::string &ckptDir, int64_t step,
                                   int section,
                                   const std::vector<TensorBytes> &tensors,
                                   CheckpointFile *written,
                                   const SafetensorsMetadata &metadata) {
  if (step < 0 || section < 0)
    return "checkpoint step and section must be non-negative (step " +
           std::to_string(step) + ", section " + std::to_string(section) + ")";
  std::string stepDir = join(ckptDir, checkpointStepDirName(step));
  std::string err = makeDirs(stepDir);
  if (!err.empty())
    return err;
  // A previous attempt at this step may have completed: its marker must not
  // vouch for the files we are about to replace.
  std::string marker = join(stepDir, kComplete);
  if (::unlink(marker.c_str()) == 0) {
    err = syncDir(stepDir);
    if (!err.empty())
      return err;
  } else if (errno != ENOENT) {
    return "cannot remove stale marker '" + marker + "': " + errnoText(errno);
  }

  std::string name = checkpointSectionFileName(section);
  SafetensorsMetadata meta = metadata;
  meta["varuna.step"] = std::to_string(step);
  meta["varuna.section"] = std::to_string(section);
  // Written piece by piece from the tensors' own bytes: no image of the
  // file in memory (for a big stage, as large as its whole state).
  SafetensorsLayout layout;
  try {
    layout = layoutSafetensors(tensors, meta, join(stepDir, name));
  } catch (const DataError &e) {
    return e.what();
  }
  err = writeFileAtomically(stepDir, name, layout.pieces);
  if (!err.empty())
    return err;
  if (written) {
    written->name = name;
    written->section = section;
    written->bytes = layout.totalBytes;
    uint32_t crc = 0;
    for (const auto &[p, n] : layout.pieces)
      crc = crc32Of(p, n, crc);
    written->crc32 = crc;
  }
  return "";
}

std::string commitCheckpoint(const std::string &ckptDir, int64_t step,
                             const std::vector<CheckpointFile> &files,
                             const TrainingState &state) {
  std::string stepDir = join(ckptDir, checkpointStepDirName(step));
  std::set<std::string> names;
  std::set<int> sections;
  for (const CheckpointFile &f : files) {
    if (!names.insert(f.name).second)
      return "checkpoint " + stepDir + ": file '" + f.name + "' listed twice";
    if (f.section >= 0 && !sections.insert(f.section).second)
      return "checkpoint " + stepDir + ": section " +
             std::to_string(f.section) + " listed twice";
    std::string path = join(stepDir, f.name);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return "cannot commit checkpoint: '" + path + "': " + errnoText(errno);
    if (static_cast<uint64_t>(st.st_size) != f.bytes)
      return "cannot commit checkpoint: '" + path + "' has " +
             std::to_string(st.st_size) + " bytes, its writer reported " +
             std::to_string(f.bytes);
  }
  std::vector<CheckpointFile> sorted = files;
  std::sort(sorted.begin(), sorted.end(),
            [](const CheckpointFile &a, const CheckpointFile &b) {
              return a.section != b.section ? a.section < b.section
                                            : a.name < b.name;
            });
  std::string manifest = manifestText(step, sorted, state);
  std::string err =
      writeFileAtomically(stepDir, kManifest, manifest.data(), manifest.size());
  if (!err.empty())
    return err;
  std::string marker =
      completeMarkerText(step, crc32Of(manifest.data(), manifest.size()));
  err = writeFileAtomically(stepDir, kComplete, marker.data(), marker.size());
  if (err.empty())
    removeLeftovers(stepDir, files);
  return err;
}

std::string
writeCheckpoint(const std::string &ckptDir, int64_t step,
                const std::vector<std::vector<TensorBytes>> &sections,
                const TrainingState &state) {
  std::vector<CheckpointFile> files(sections.size());
  for (size_t k = 0; k < sections.size(); ++k) {
    std::string err = writeCheckpointSection(ckptDir, step, static_cast<int>(k),
                                             sections[k], &files[k]);
    if (!err.empty())
      return err;
  }
  return commitCheckpoint(ckptDir, step, files, state);
}

std::string verifyCheckpoint(const std::string &stepDir, int64_t step,
                             CheckpointManifest *manifestOut, bool readFiles) {
  std::string err;
  std::optional<std::vector<uint8_t>> marker =
      readAll(join(stepDir, kComplete), &err);
  if (!marker)
    return err == errnoText(ENOENT)
               ? "torn: no " + std::string(kComplete) + " marker"
               : std::string(kComplete) + " marker unreadable: " + err;
  std::optional<std::vector<uint8_t>> manifestBytes =
      readAll(join(stepDir, kManifest), &err);
  if (!manifestBytes)
    return std::string(kManifest) + " unreadable: " + err;
  uint32_t manifestCrc = crc32Of(manifestBytes->data(), manifestBytes->size());
  std::string markerText(marker->begin(), marker->end());
  if (markerText != completeMarkerText(step, manifestCrc)) {
    // Say which side is wrong: a marker that is not one, one of another
    // step (a renamed or copied directory), or a manifest changed since.
    std::string prefix = std::string(kFormat) + " step=";
    long long markedStep = -1;
    unsigned markedCrc = 0;
    int used = 0;
    if (markerText.rfind(prefix, 0) != 0 ||
        std::sscanf(markerText.c_str() + prefix.size(),
                    "%lld manifest-crc32=%8x%n", &markedStep, &markedCrc,
                    &used) != 2)
      return std::string(kComplete) + " marker is not one (it holds " +
             std::to_string(marker->size()) + " bytes not of the form \"" +
             prefix + "N manifest-crc32=X\")";
    if (markedStep != step)
      return std::string(kComplete) + " marker is for step " +
             std::to_string(markedStep) + ", the directory for step " +
             std::to_string(step) + " (renamed or copied?)";
    return std::string(kManifest) + " does not match the " + kComplete +
           " marker (its CRC-32 is " + hex32(manifestCrc) + ", the marker's " +
           hex32(markedCrc) + "): manifest corrupt or replaced";
  }
  CheckpointManifest manifest;
  err = parseManifest(*manifestBytes, join(stepDir, kManifest), &manifest);
  if (!err.empty())
    return "bad manifest: " + err;
  if (manifest.step != step)
    return "manifest is for step " + std::to_string(manifest.step);
  for (const CheckpointFile &f : manifest.files) {
    std::string path = join(stepDir, f.name);
    uint64_t size = 0;
    uint32_t crc = 0;
    if (readFiles) {
      err = fileSizeAndCrc(path, &size, &crc);
    } else {
      std::error_code ec;
      size = fs::file_size(path, ec);
      err = ec ? ec.message() : "";
      crc = f.crc32; // not read
    }
    if (!err.empty())
      return f.name + " missing or unreadable: " + err;
    if (size < f.bytes)
      return f.name + " truncated: " + std::to_string(size) +
             " bytes, the manifest records " + std::to_string(f.bytes);
    if (size > f.bytes)
      return f.name + " has the wrong size: " + std::to_string(size) +
             " bytes, the manifest records " + std::to_string(f.bytes);
    if (crc != f.crc32)
      return f.name + " checksum mismatch: crc32 " + hex32(crc) +
             ", the manifest records " + hex32(f.crc32);
  }
  if (manifestOut)
    *manifestOut = std::move(manifest);
  return "";
}

bool isCommitted(const std::string &ckptDir, int64_t step) {
  std::error_code ec;
  return fs::exists(
      join(join(ckptDir, checkpointStepDirName(step)), kComplete), ec);
}

std::optional<int64_t> newestCommittedStep(const std::string &ckptDir) {
  std::vector<std::pair<int64_t, std::string>> steps; // newest first
  if (!listSteps(ckptDir, &steps).empty())
    return std::nullopt;
  for (const auto &[step, dir] : steps) {
    std::error_code ec;
    if (fs::exists(join(dir, kComplete), ec))
      return step;
  }
  return std::nullopt;
}

FindResult findLatestComplete(const std::string &ckptDir) {
  FindResult result;
  std::vector<std::pair<int64_t, std::string>> steps;
  result.error = listSteps(ckptDir, &steps);
  if (!result.error.empty())
    return result;
  for (const auto &[step, path] : steps) {
    CheckpointManifest manifest;
    std::string why = verifyCheckpoint(path, step, &manifest);
    if (!why.empty()) {
      result.warnings.push_back("skipped " + path + ": " + why);
      continue;
    }
    result.latest = CheckpointInfo{step, path, std::move(manifest)};
    break;
  }
  return result;
}

std::string listCheckpoints(const std::string &ckptDir, bool readFiles,
                            std::vector<StepDirectory> *out) {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::string err = listSteps(ckptDir, &steps);
  if (!err.empty())
    return err;
  for (const auto &[step, path] : steps) {
    StepDirectory d{step, path, "", {}};
    d.problem = verifyCheckpoint(path, step, &d.manifest, readFiles);
    out->push_back(std::move(d));
  }
  return "";
}

std::string openCheckpoint(const std::string &ckptDir, int64_t step,
                           CheckpointInfo *out) {
  std::string path = join(ckptDir, checkpointStepDirName(step));
  CheckpointManifest manifest;
  std::string why = verifyCheckpoint(path, step, &manifest,
                                     /*readFiles=*/false);
  if (!why.empty())
    return path + ": " + why;
  *out = CheckpointInfo{step, path, std::move(manifest)};
  return "";
}

SafetensorsFile loadSection(const CheckpointInfo &ckpt, int section) {
  const CheckpointFile *f = ckpt.sectionFile(section);
  if (!f)
    throw DataError(join(ckpt.path, kManifest) +
                    ": checkpoint has no section " + std::to_string(section));
  std::string path = join(ckpt.path, f->name);
  std::string err;
  std::optional<std::vector<uint8_t>> bytes = readAll(path, &err);
  if (!bytes)
    throw DataError(path + ": cannot read: " + err);
  if (bytes->size() != f->bytes)
    throw DataError(path + ": " + std::to_string(bytes->size()) +
                    " bytes, the manifest records " + std::to_string(f->bytes));
  uint32_t crc = crc32Of(bytes->data(), bytes->size());
  if (crc != f->crc32)
    throw DataError(path + ": checksum mismatch: crc32 " + hex32(crc) +
                    ", the manifest records " + hex32(f->crc32));
  return parseSafetensors(bytes->data(), bytes->size(), path);
}

/// Removes the step directories of `steps` that `doomed` picks, then syncs
/// CKPT_DIR; stops at the first that cannot be removed.
static PruneResult
removeSteps(const std::string &ckptDir,
            const std::vector<std::pair<int64_t, std::string>> &steps,
            const std::function<bool(int64_t)> &doomed) {
  PruneResult result;
  for (const auto &[step, path] : steps) {
    if (!doomed(step))
      continue;
    std::string err = removeStepDir(path);
    if (!err.empty()) {
      result.error = err;
      return result;
    }
    result.removed.push_back(path);
  }
  if (!result.removed.empty())
    result.error = syncDir(ckptDir);
  return result;
}

PruneResult removeNewerThan(const std::string &ckptDir, int64_t step) {
  PruneResult result;
  std::vector<std::pair<int64_t, std::string>> steps;
  result.error = listSteps(ckptDir, &steps);
  if (!result.error.empty())
    return result;
  // Committed ones that did not verify stay: a read error of the moment
  // (a network file system) would otherwise delete a good checkpoint.
  return removeSteps(ckptDir, steps, [&](int64_t s) {
    std::error_code ec;
    return s > step &&
           !fs::exists(join(join(ckptDir, checkpointStepDirName(s)),
                            kComplete),
                       ec);
  });
}

PruneResult keepLast(const std::string &ckptDir, int n, bool readFiles) {
  PruneResult result;
  if (n < 1) {
    result.error = "keepLast: must keep at least one checkpoint (asked for " +
                   std::to_string(n) + ")";
    return result;
  }
  std::vector<std::pair<int64_t, std::string>> steps;
  result.error = listSteps(ckptDir, &steps);
  if (!result.error.empty())
    return result;
  int good = 0;
  std::optional<int64_t> cutoff;
  for (const auto &[step, path] : steps) {
    CheckpointManifest manifest;
    if (!verifyCheckpoint(path, step, &manifest, readFiles).empty())
      continue;
    removeLeftovers(path, manifest.files);
    if (++good == n) {
      cutoff = step;
      break;
    }
  }
  if (!cutoff)
    return result;
  return removeSteps(ckptDir, steps,
                     [&](int64_t step) { return step < *cutoff; });
}

std::string lockCheckpointDirectory(const std::string &ckptDir) {
  std::string path = join(ckptDir, ".varuna-run.lock");
  // Not inherited by the ranks a launcher starts (it holds the lock for
  // them); closed, and so released, when this process exits.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot open '" + path + "': " + errnoText(errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    // The holder wrote "pid N on host H" (below); said when it is there.
    char buf[256] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? " (" + std::string(buf, size_t(n)) + ")" : "";
    ::close(fd);
    if (err != EWOULDBLOCK)
      return "cannot lock '" + path + "': " + errnoText(err);
    return "the checkpoint directory '" + ckptDir +
           "' is in use by another run" + holder +
           ": two runs writing one directory mix their checkpoints; wait "
           "for it to end (or stop it), or give another --checkpoint-dir";
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string who = "pid " + std::to_string(::getpid()) + " on host " + host;
  if (::ftruncate(fd, 0) == 0) {
    ssize_t ignored = ::pwrite(fd, who.data(), who.size(), 0);
    (void)ignored; // the pid is for the message only; the lock is the fd
  }
  return ""; // fd stays open: the lock lasts as long as the process
}

} // namespace varuna::rt
