//===- varuna-ckpt.cpp - Inspect, write and prune Varuna checkpoints ------===//
//
//   varuna-ckpt write DIR --step N [--demo K] [--state KEY=VALUE]...
//               [--section K --tensor NAME=FILE.npy...]...
//   varuna-ckpt latest DIR
//   varuna-ckpt list DIR
//   varuna-ckpt verify DIR [--step N]
//   varuna-ckpt dump FILE.safetensors
//   varuna-ckpt prune DIR --keep N
//
// `write` stores .npy arrays (or K demo sections) as a checkpoint with the
// runtime's writer; `latest` prints the newest complete checkpoint and, on
// stderr, why each newer one was skipped; `list` shows every step directory
// and what is wrong with it (by the files' sizes), `verify` reads every file
// and checks its CRC. See docs/checkpoints.md.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <sys/stat.h>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

using namespace varuna::rt;

namespace {

const char *kUsage =
    "usage: varuna-ckpt write DIR --step N [--demo K] [--state KEY=VALUE]...\n"
    "                         [--section K --tensor NAME=FILE.npy...]...\n"
    "       varuna-ckpt latest DIR\n"
    "       varuna-ckpt list DIR\n"
    "       varuna-ckpt verify DIR [--step N]\n"
    "       varuna-ckpt dump FILE.safetensors\n"
    "       varuna-ckpt prune DIR --keep N\n"
    "       varuna-ckpt --version\n";

[[noreturn]] void usage(const std::string &why) {
  std::fprintf(stderr, "varuna-ckpt: error: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

int64_t parseInt(const std::string &flag, const char *text) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || !*text || *end || v < 0)
    usage(flag + " needs a non-negative integer, got '" + text + "'");
  return v;
}

/// Section k of the demo checkpoint: parameters and an optimizer state
/// tensor with values a reader can recompute (test/Runtime/Inputs).
std::vector<TensorBytes> demoSection(int k) {
  auto f32 = [](std::string name, std::vector<int64_t> shape, float base) {
    TensorBytes t{std::move(name), "F32", std::move(shape), {}};
    int64_t n = t.numElements();
    t.data.resize(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      float v = base + static_cast<float>(i) / 8.0f;
      std::memcpy(t.data.data() + 4 * i, &v, 4);
    }
    return t;
  };
  std::string p = "layers." + std::to_string(k);
  std::vector<TensorBytes> ts;
  ts.push_back(f32(p + ".weight", {2, 3}, static_cast<float>(k)));
  ts.push_back(f32(p + ".bias", {3}, -static_cast<float>(k)));
  ts.push_back(
      f32(optimizerStateTensorName(p + ".weight", "exp_avg"), {2, 3}, 0.5f));
  TensorBytes idx{p + ".index", "I64", {4}, std::vector<uint8_t>(32)};
  for (int64_t i = 0; i < 4; ++i) {
    int64_t v = 10 * k + i;
    std::memcpy(idx.data.data() + 8 * i, &v, 8);
  }
  ts.push_back(std::move(idx));
  return ts;
}

int cmdWrite(int argc, char **argv) {
  if (argc < 1)
    usage("write: missing DIR");
  std::string dir = argv[0];
  int64_t step = -1, demo = 0;
  TrainingState state;
  std::map<int, std::vector<TensorBytes>> sections;
  int current = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--step") {
      step = parseInt(a, value());
    } else if (a == "--demo") {
      demo = parseInt(a, value());
    } else if (a == "--section") {
      current = static_cast<int>(parseInt(a, value()));
      sections[current];
    } else if (a == "--state" || a == "--tensor") {
      std::string kv = value();
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        usage(a + " needs NAME=VALUE, got '" + kv + "'");
      if (a == "--state") {
        state[kv.substr(0, eq)] = kv.substr(eq + 1);
        continue;
      }
      if (current < 0)
        usage("--tensor must follow a --section");
      for (const TensorBytes &t : sections[current])
        if (t.name == kv.substr(0, eq))
          usage("--tensor " + t.name + " given twice in section " +
                std::to_string(current));
      NpyArray arr = readNpy(kv.substr(eq + 1));
      sections[current].push_back(TensorBytes{kv.substr(0, eq),
                                              safetensorsDtype(arr.dtype),
                                              arr.shape, std::move(arr.data)});
    } else {
      usage("write: unknown argument '" + a + "'");
    }
  }
  if (step < 0)
    usage("write: --step is required");
  for (int k = 0; k < demo; ++k)
    if (!sections.count(k))
      sections[k] = demoSection(k);
  if (sections.empty())
    usage("write: nothing to write: give --section K with its --tensor "
          "NAME=FILE.npy, or --demo K");
  // (Its files would be replaced one by one, a section it does not write
  // left beside the new manifest; varuna-run refuses such a directory too.)
  if (isCommitted(dir, step)) {
    std::fprintf(stderr,
                 "varuna-ckpt: error: '%s/%s' is a committed checkpoint "
                 "already: remove it first (or give another --step)\n",
                 dir.c_str(), checkpointStepDirName(step).c_str());
    return 1;
  }
  std::vector<CheckpointFile> files;
  for (const auto &[k, tensors] : sections) {
    CheckpointFile f;
    std::string err = writeCheckpointSection(dir, step, k, tensors, &f);
    if (!err.empty()) {
      std::fprintf(stderr, "varuna-ckpt: error: %s\n", err.c_str());
      return 1;
    }
    files.push_back(f);
  }
  std::string err = commitCheckpoint(dir, step, files, state);
  if (!err.empty()) {
    std::fprintf(stderr, "varuna-ckpt: error: %s\n", err.c_str());
    return 1;
  }
  std::printf("wrote %s (%zu sections)\n",
              (dir + "/" + checkpointStepDirName(step)).c_str(), files.size());
  return 0;
}

/// Why DIR holds no step directory, as ": ..." to follow its name, or "":
/// a step directory given for the checkpoint directory, or no directory at
/// all (both were just "no complete checkpoint").
std::string whyNoSteps(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return ": it does not exist";
  if (!S_ISDIR(st.st_mode))
    return ": it is not a directory";
  if (::stat((dir + "/manifest.json").c_str(), &st) == 0)
    return ": it is one step's directory; give the checkpoint directory "
           "that holds the step-<N> directories";
  return "";
}

int cmdLatest(int argc, char **argv) {
  if (argc != 1)
    usage("latest takes exactly one DIR");
  FindResult r = findLatestComplete(argv[0]);
  for (const std::string &w : r.warnings)
    std::fprintf(stderr, "varuna-ckpt: warning: %s\n", w.c_str());
  if (!r.error.empty()) {
    std::fprintf(stderr, "varuna-ckpt: error: %s\n", r.error.c_str());
    return 1;
  }
  if (!r.latest) {
    std::fprintf(stderr, "varuna-ckpt: no complete checkpoint in %s%s\n",
                 argv[0], whyNoSteps(argv[0]).c_str());
    return 1;
  }
  std::printf("step %lld\npath %s\n", static_cast<long long>(r.latest->step),
              r.latest->path.c_str());
  for (const CheckpointFile &f : r.latest->manifest.files)
    std::printf("file %s section %d bytes %llu crc32 0x%08x\n", f.name.c_str(),
                f.section, static_cast<unsigned long long>(f.bytes), f.crc32);
  // The random generator's state is ~10 KB of hex: its start and its size.
  constexpr size_t kShown = 64;
  for (const auto &[k, v] : r.latest->manifest.state)
    if (v.size() > kShown)
      std::printf("state %s=%s... (%zu characters)\n", k.c_str(),
                  v.substr(0, kShown).c_str(), v.size());
    else
      std::printf("state %s=%s\n", k.c_str(), v.c_str());
  return 0;
}

/// The step directories of DIR, each checked (`readFiles`: by CRC, else
/// by size); exits with an error when DIR holds none.
std::vector<StepDirectory> stepsOf(const std::string &dir, bool readFiles) {
  std::vector<StepDirectory> steps;
  std::string err = listCheckpoints(dir, readFiles, &steps);
  if (!err.empty()) {
    std::fprintf(stderr, "varuna-ckpt: error: %s\n", err.c_str());
    std::exit(1);
  }
  if (steps.empty()) {
    std::fprintf(stderr, "varuna-ckpt: no checkpoint in %s%s\n", dir.c_str(),
                 whyNoSteps(dir).c_str());
    std::exit(1);
  }
  return steps;
}

/// One line per step directory, newest first: "step-N complete, K sections,
/// B bytes, shape S" or "step-N bad: why". A torn directory newer than the
/// newest good one may be a write in progress. Exit 0 whatever the step
/// directories hold (1 when DIR holds none: stepsOf).
int cmdList(int argc, char **argv) {
  if (argc != 1)
    usage("list takes exactly one DIR");
  for (const StepDirectory &d : stepsOf(argv[0], /*readFiles=*/false)) {
    std::string name = checkpointStepDirName(d.step);
    if (!d.problem.empty()) {
      std::printf("%s bad: %s\n", name.c_str(), d.problem.c_str());
      continue;
    }
    uint64_t bytes = 0;
    int sections = 0;
    for (const CheckpointFile &f : d.manifest.files) {
      bytes += f.bytes;
      sections += f.section >= 0;
    }
    std::string shape;
    auto it = d.manifest.state.find("shape");
    if (it != d.manifest.state.end() && !it->second.empty())
      shape = ", shape " + it->second;
    std::printf("%s complete, %d section%s, %llu bytes%s\n", name.c_str(),
                sections, sections == 1 ? "" : "s",
                static_cast<unsigned long long>(bytes), shape.c_str());
  }
  return 0;
}

/// Reads every file of every step directory (or of step N) and checks its
/// size and CRC: "step-N ok" or "step-N bad: why"; exit 1 if any is bad.
int cmdVerify(int argc, char **argv) {
  if (argc != 1 && !(argc == 3 && std::strcmp(argv[1], "--step") == 0))
    usage("verify takes DIR [--step N]");
  int64_t only = argc == 3 ? parseInt("--step", argv[2]) : -1;
  std::vector<StepDirectory> steps;
  if (only >= 0) {
    // One step: checked alone, not after reading all the others.
    std::string path =
        std::string(argv[0]) + "/" + checkpointStepDirName(only);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "varuna-ckpt: error: no step %lld in %s%s\n",
                   static_cast<long long>(only), argv[0],
                   whyNoSteps(argv[0]).c_str());
      return 1;
    }
    steps.push_back(StepDirectory{only, path, verifyCheckpoint(path, only), {}});
  } else {
    steps = stepsOf(argv[0], /*readFiles=*/true);
  }
  int bad = 0;
  for (const StepDirectory &d : steps) {
    std::string name = checkpointStepDirName(d.step);
    if (d.problem.empty())
      std::printf("%s ok\n", name.c_str());
    else
      std::printf("%s bad: %s\n", name.c_str(), d.problem.c_str());
    bad += !d.problem.empty();
  }
  return bad ? 1 : 0;
}

int cmdDump(int argc, char **argv) {
  if (argc != 1)
    usage("dump takes exactly one FILE");
  SafetensorsFile f = readSafetensors(argv[0]);
  for (const auto &[k, v] : f.metadata)
    std::printf("metadata %s=%s\n", k.c_str(), v.c_str());
  for (const TensorBytes &t : f.tensors)
    std::printf("tensor %s %s %s %zu bytes\n", t.name.c_str(), t.dtype.c_str(),
                formatShape(t.shape).c_str(), t.data.size());
  return 0;
}

int cmdPrune(int argc, char **argv) {
  if (argc != 3 || std::strcmp(argv[1], "--keep") != 0)
    usage("prune takes DIR --keep N");
  if (parseInt("--keep", argv[2]) < 1)
    usage("--keep must be at least 1: prune keeps the newest N complete "
          "checkpoints and removes the rest");
  PruneResult r =
      keepLast(argv[0], static_cast<int>(parseInt("--keep", argv[2])));
  for (const std::string &d : r.removed)
    std::printf("removed %s\n", d.c_str());
  if (!r.error.empty()) {
    std::fprintf(stderr, "varuna-ckpt: error: %s\n", r.error.c_str());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    usage("missing command");
  std::string cmd = argv[1];
  if (cmd == "--version") {
    std::printf("varuna-ckpt %s\n", VARUNA_VERSION);
    return 0;
  }
  if (cmd == "--help" || cmd == "-h") {
    std::printf("%s", kUsage);
    return 0;
  }
  try {
    if (cmd == "write")
      return cmdWrite(argc - 2, argv + 2);
    if (cmd == "latest")
      return cmdLatest(argc - 2, argv + 2);
    if (cmd == "list")
      return cmdList(argc - 2, argv + 2);
    if (cmd == "verify")
      return cmdVerify(argc - 2, argv + 2);
    if (cmd == "dump")
      return cmdDump(argc - 2, argv + 2);
    if (cmd == "prune")
      return cmdPrune(argc - 2, argv + 2);
  } catch (const DataError &e) {
    std::fprintf(stderr, "varuna-ckpt: error: %s\n", e.what());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "varuna-ckpt: error: %s\n", e.what());
    return 1;
  }
  usage("unknown command '" + cmd + "'");
}
