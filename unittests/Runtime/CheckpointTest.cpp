//===- CheckpointTest.cpp - Safetensors and checkpoint recovery -----------===//

#include "varuna/runtime/Checkpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <unistd.h>

using namespace varuna::rt;
namespace fs = std::filesystem;

namespace {

TensorBytes f32(std::string name, std::vector<int64_t> shape, float base) {
  TensorBytes t{std::move(name), "F32", std::move(shape), {}};
  int64_t n = t.numElements();
  t.data.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    float v = base + static_cast<float>(i);
    std::memcpy(t.data.data() + 4 * i, &v, 4);
  }
  return t;
}

TensorBytes raw(std::string name, std::string dtype, std::vector<int64_t> shape,
                size_t bytes, uint8_t fill) {
  return TensorBytes{std::move(name), std::move(dtype), std::move(shape),
                     std::vector<uint8_t>(bytes, fill)};
}

std::string errorOf(const std::vector<uint8_t> &image) {
  try {
    parseSafetensors(image.data(), image.size(), "bad.safetensors");
  } catch (const DataError &e) {
    return e.what();
  }
  return "";
}

/// A file image with the given header text and `bufferBytes` of data.
std::vector<uint8_t> image(const std::string &header, size_t bufferBytes,
                           uint64_t headerLen = UINT64_MAX) {
  if (headerLen == UINT64_MAX)
    headerLen = header.size();
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(headerLen >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + bufferBytes, 0xAB);
  return out;
}

class TempDir : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/varuna-ckpt-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(root, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(root, ec);
  }
  std::string root;
};

std::vector<std::vector<TensorBytes>> sections(float base) {
  return {{f32("embed.weight", {4, 2}, base),
           f32(optimizerStateTensorName("embed.weight", "exp_avg"), {4, 2}, 0)},
          {f32("head.weight", {2, 3}, base + 100), f32("head.bias", {3}, base),
           raw("head.mask", "BOOL", {3}, 3, 1)}};
}

void flipByte(const std::string &path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x10));
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

} // namespace

//===----------------------------------------------------------------------===//
// Safetensors
//===----------------------------------------------------------------------===//

TEST(Safetensors, RoundTrip) {
  std::vector<TensorBytes> ts = {
      raw("a.bias", "F16", {3}, 6, 7),
      f32("weird \"name\"\n\u00e9", {2, 2}, 1.5f),
      raw("ids", "I64", {2}, 16, 9),
      raw("scalar", "F64", {}, 8, 3),
      raw("empty", "F32", {0, 5}, 0, 0),
      raw("flags", "BOOL", {5}, 5, 1),
      raw("half", "BF16", {1, 1}, 2, 4),
  };
  SafetensorsMetadata meta = {{"format", "pt"}, {"note", "x\ty"}};
  std::vector<uint8_t> bytes = serializeSafetensors(ts, meta, "mem");
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, bytes.data(), 8);
  EXPECT_EQ(headerLen % 8, 0u);

  SafetensorsFile f = parseSafetensors(bytes.data(), bytes.size(), "mem");
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), ts.size());
  uint64_t offset = 0;
  for (const TensorBytes &t : f.tensors) {
    // Largest element sizes first: every tensor aligned in the buffer.
    size_t elem = safetensorsDtypeSize(t.dtype);
    EXPECT_EQ(offset % elem, 0u) << t.name;
    offset += t.data.size();
  }
  for (const TensorBytes &t : ts) {
    const TensorBytes *got = f.find(t.name);
    ASSERT_NE(got, nullptr) << t.name;
    EXPECT_EQ(got->dtype, t.dtype);
    EXPECT_EQ(got->shape, t.shape);
    EXPECT_EQ(got->data, t.data);
  }
}

TEST(Safetensors, WriterRejectsBadTensors) {
  auto err = [](std::vector<TensorBytes> ts) -> std::string {
    try {
      serializeSafetensors(ts, {}, "out.safetensors");
    } catch (const DataError &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(
      contains(err({raw("a", "F32", {2}, 7, 0)}), "7 bytes do not match"));
  EXPECT_TRUE(
      contains(err({raw("a", "F33", {2}, 8, 0)}), "unknown dtype 'F33'"));
  EXPECT_TRUE(
      contains(err({raw("a", "U8", {1}, 1, 0), raw("a", "U8", {1}, 1, 0)}),
               "duplicate tensor name 'a'"));
  EXPECT_TRUE(
      contains(err({raw("__metadata__", "U8", {1}, 1, 0)}), "reserved"));
  EXPECT_EQ(err({raw("a", "U8", {1}, 1, 0)}), "");
}

TEST(Safetensors, ReaderErrorsNameFileAndCause) {
  const std::string t = R"("t":{"dtype":"F32","shape":[2],"data_offsets":)";
  struct Case {
    std::vector<uint8_t> bytes;
    const char *expect;
  } cases[] = {
      {{1, 2, 3}, "shorter than the 8-byte header length"},
      {image("{}", 0, 1000), "header length 1000 exceeds the file"},
      {image("[1]", 0), "header is not a JSON object"},
      {image("{\"t\": {", 0), "malformed JSON"},
      {image("{" + t + "[0,8]}}", 8), ""}, // the valid baseline
      {image("{" + t + "[0,8]},}", 8), "malformed JSON"},
      {image("{" + t + "[0,8]}, \"t\": 1}", 8), "duplicate key"},
      {image(R"({"t":{"dtype":"Q8","shape":[2],"data_offsets":[0,8]}})", 8),
       "unknown dtype 'Q8'"},
      {image(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "non-negative integers"},
      {image(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
       "non-negative integers"},
      {image(R"({"t":{"dtype":"F32","shape":[2]}})", 8), "needs 'dtype'"},
      {image("{" + t + "[0,12]}}", 12),
       "12 bytes in data_offsets do not match"},
      {image("{" + t + "[0,8]}}", 4), "exceed the data buffer"},
      {image("{" + t + "[8,0]}}", 8), "end before they begin"},
      {image("{" + t + "[0,8]}}", 12), "4 trailing bytes"},
      {image("{" + t + "[4,12]}}", 12), "gap of 4 bytes"},
      {image("{" + t + "[0,8]}, " +
                 R"("u":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             12),
       "overlaps tensor 't'"},
      {image(R"({"__metadata__":{"k":1}})", 0), "is not a string"},
      {image(std::string(100, '[') + "{}", 0), "not a JSON object"},
      {image("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}",
             0),
       "nesting deeper than 64"},
  };
  for (const Case &c : cases) {
    std::string err = errorOf(c.bytes);
    if (!*c.expect) {
      EXPECT_EQ(err, "");
      continue;
    }
    EXPECT_TRUE(contains(err, "bad.safetensors")) << err;
    EXPECT_TRUE(contains(err, c.expect))
        << "expected '" << c.expect << "' in: " << err;
  }
}

TEST(Safetensors, JsonEscapesRoundTrip) {
  std::string s = "q\"b\\s/\x01\n\u00e9\xF0\x9F\x98\x80";
  json::Value v = json::parse(json::quote(s), "x");
  EXPECT_EQ(v.text, s);
  EXPECT_EQ(json::parse(R"("\ud83d\ude00\u00e9")", "x").text,
            "\xF0\x9F\x98\x80\u00e9");
  EXPECT_THROW(json::parse(R"("\ud83d")", "x"), DataError);
  EXPECT_THROW(json::parse("01", "x"), DataError);
  EXPECT_EQ(json::parse("18446744073709551615", "x").asU64(), UINT64_MAX);
  EXPECT_EQ(json::parse("18446744073709551616", "x").asU64(), std::nullopt);
}

TEST_F(TempDir, SafetensorsFileErrorsNamePath) {
  std::string path = root + "/x.safetensors";
  writeSafetensors(path, {f32("w", {3}, 0)});
  EXPECT_EQ(readSafetensors(path).tensors.size(), 1u);
  fs::resize_file(path, fs::file_size(path) - 1);
  try {
    readSafetensors(path);
    FAIL() << "expected an error";
  } catch (const DataError &e) {
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
    EXPECT_TRUE(contains(e.what(), "exceed the data buffer")) << e.what();
  }
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

TEST_F(TempDir, WriteFindLoad) {
  std::string dir = root + "/ckpt";
  EXPECT_EQ(writeCheckpoint(dir, 10, sections(1), {{"loss_scale", "65536"}}),
            "");
  EXPECT_EQ(writeCheckpoint(dir, 20, sections(2),
                            {{"loss_scale", "32768"},
                             {"rng_seed", "18446744073709551615"}}),
            "");
  for (const char *f : {"section-0.safetensors", "section-1.safetensors",
                        "manifest.json", "COMPLETE"})
    EXPECT_TRUE(fs::exists(dir + "/step-20/" + f)) << f;
  for (const auto &e : fs::directory_iterator(dir + "/step-20"))
    EXPECT_NE(e.path().filename().string()[0], '.') << "temp file left behind";

  FindResult r = findLatestComplete(dir);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.warnings.empty());
  ASSERT_TRUE(r.latest);
  EXPECT_EQ(r.latest->step, 20);
  EXPECT_EQ(r.latest->manifest.state.at("rng_seed"), "18446744073709551615");
  ASSERT_EQ(r.latest->manifest.files.size(), 2u);

  auto want = sections(2);
  for (int k = 0; k < 2; ++k) {
    SafetensorsFile f = loadSection(*r.latest, k);
    EXPECT_EQ(f.metadata.at("varuna.step"), "20");
    EXPECT_EQ(f.metadata.at("varuna.section"), std::to_string(k));
    ASSERT_EQ(f.tensors.size(), want[k].size());
    for (const TensorBytes &t : want[k]) {
      const TensorBytes *got = f.find(t.name);
      ASSERT_NE(got, nullptr) << t.name;
      EXPECT_EQ(got->shape, t.shape);
      EXPECT_EQ(got->data, t.data);
    }
  }
  EXPECT_THROW(loadSection(*r.latest, 2), DataError);
}

// Tensors given as views of memory the caller holds (what the trainers
// write: no copy of a stage's state) make the same file as owned bytes,
// and the manifest's size and CRC are the file's.
TEST_F(TempDir, ViewsWriteTheSameFile) {
  std::vector<TensorBytes> owned = sections(1)[0];
  std::vector<TensorBytes> viewed;
  for (const TensorBytes &t : owned) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(t.data);
    TensorBytes v{t.name, t.dtype, t.shape, {}};
    v.view = bytes->data();
    v.viewSize = bytes->size();
    v.keepAlive = bytes;
    viewed.push_back(std::move(v));
  }
  EXPECT_EQ(serializeSafetensors(viewed, {{"k", "v"}}, "x"),
            serializeSafetensors(owned, {{"k", "v"}}, "x"));
  CheckpointFile a, b;
  ASSERT_EQ(writeCheckpointSection(root + "/a", 1, 0, owned, &a), "");
  ASSERT_EQ(writeCheckpointSection(root + "/b", 1, 0, viewed, &b), "");
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.crc32, b.crc32);
  std::ifstream in(root + "/b/step-1/section-0.safetensors", std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
  EXPECT_EQ(file.size(), b.bytes);
  EXPECT_EQ(crc32Of(file.data(), file.size()), b.crc32);
  // A view whose size does not fit its shape is refused like owned bytes.
  viewed[0].viewSize -= 4;
  EXPECT_NE(writeCheckpointSection(root + "/c", 1, 0, viewed, nullptr), "");
}

TEST_F(TempDir, MissingDirectoryMeansNoCheckpoint) {
  FindResult r = findLatestComplete(root + "/nothing-here");
  EXPECT_FALSE(r.latest);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.warnings.empty());
}

TEST_F(TempDir, TornTruncatedAndBitFlippedFallBack) {
  std::string dir = root + "/ckpt";
  for (int step : {1, 2, 3, 4, 5})
    ASSERT_EQ(writeCheckpoint(dir, step, sections(step), {}), "");
  // step-5: torn (crashed before the marker).
  fs::remove(dir + "/step-5/COMPLETE");
  // step-4: a section file truncated.
  std::string s4 = dir + "/step-4/section-1.safetensors";
  fs::resize_file(s4, fs::file_size(s4) - 3);
  // step-3: one bit flipped in the tensor data.
  std::string s3 = dir + "/step-3/section-0.safetensors";
  flipByte(s3, static_cast<std::streamoff>(fs::file_size(s3) - 5));
  // step-2: the manifest edited after the marker was written.
  {
    std::ofstream m(dir + "/step-2/manifest.json", std::ios::app);
    m << " ";
  }

  FindResult r = findLatestComplete(dir);
  ASSERT_TRUE(r.latest);
  EXPECT_EQ(r.latest->step, 1);
  ASSERT_EQ(r.warnings.size(), 4u);
  EXPECT_TRUE(contains(r.warnings[0], "step-5") &&
              contains(r.warnings[0], "torn: no COMPLETE marker"))
      << r.warnings[0];
  EXPECT_TRUE(contains(r.warnings[1], "step-4") &&
              contains(r.warnings[1], "section-1.safetensors truncated"))
      << r.warnings[1];
  EXPECT_TRUE(
      contains(r.warnings[2], "step-3") &&
      contains(r.warnings[2], "section-0.safetensors checksum mismatch"))
      << r.warnings[2];
  EXPECT_TRUE(contains(r.warnings[3], "step-2") &&
              contains(r.warnings[3], "manifest.json does not match"))
      << r.warnings[3];

  // A missing section file.
  fs::remove(dir + "/step-1/section-0.safetensors");
  r = findLatestComplete(dir);
  EXPECT_FALSE(r.latest);
  ASSERT_EQ(r.warnings.size(), 5u);
  EXPECT_TRUE(contains(r.warnings[4], "section-0.safetensors missing"))
      << r.warnings[4];
}

TEST_F(TempDir, LoadSectionRechecksTheFile) {
  std::string dir = root + "/ckpt";
  ASSERT_EQ(writeCheckpoint(dir, 7, sections(0), {}), "");
  FindResult r = findLatestComplete(dir);
  ASSERT_TRUE(r.latest);
  flipByte(dir + "/step-7/section-1.safetensors", 20);
  try {
    loadSection(*r.latest, 1);
    FAIL() << "expected an error";
  } catch (const DataError &e) {
    EXPECT_TRUE(contains(e.what(), "section-1.safetensors: checksum mismatch"))
        << e.what();
  }
}

TEST_F(TempDir, UnwritableParentIsAClearError) {
  // Under a regular file: fails even for root.
  std::string file = root + "/plain-file";
  std::ofstream(file) << "x";
  std::string err = writeCheckpoint(file + "/ckpt", 1, sections(0), {});
  EXPECT_TRUE(contains(err, "cannot create checkpoint directory")) << err;
  EXPECT_TRUE(contains(err, file)) << err;
  EXPECT_FALSE(findLatestComplete(root).latest);
}

TEST_F(TempDir, ReadOnlyDirectoryIsAClearError) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "permission bits do not stop root";
  std::string dir = root + "/ro";
  fs::create_directory(dir);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  std::string err = writeCheckpoint(dir, 1, sections(0), {});
  EXPECT_TRUE(contains(err, dir)) << err;
  EXPECT_TRUE(contains(err, "Permission denied")) << err;
  EXPECT_FALSE(findLatestComplete(dir).latest);
}

TEST_F(TempDir, FailedWriteNeverLooksComplete) {
  std::string dir = root + "/ckpt";
  ASSERT_EQ(writeCheckpoint(dir, 1, sections(1), {}), "");
  ASSERT_EQ(writeCheckpoint(dir, 2, sections(2), {}), "");
  // Rewriting step 2 fails in section 1: the old marker must be gone.
  auto bad = sections(3);
  bad[1][0].data.pop_back();
  std::string err = writeCheckpoint(dir, 2, bad, {});
  EXPECT_TRUE(contains(err, "do not match")) << err;
  EXPECT_FALSE(fs::exists(dir + "/step-2/COMPLETE"));
  FindResult r = findLatestComplete(dir);
  ASSERT_TRUE(r.latest);
  EXPECT_EQ(r.latest->step, 1);

  // commit refuses files whose size differs from what the writer reported.
  CheckpointFile f;
  ASSERT_EQ(writeCheckpointSection(dir, 3, 0, sections(3)[0], &f), "");
  f.bytes += 1;
  err = commitCheckpoint(dir, 3, {f}, {});
  EXPECT_TRUE(contains(err, "its writer reported")) << err;
  EXPECT_FALSE(fs::exists(dir + "/step-3/COMPLETE"));
}

TEST_F(TempDir, ShardedWritersThenOneCommit) {
  // Two "ranks" write their own sections; one commits.
  std::string dir = root + "/ckpt";
  auto secs = sections(5);
  CheckpointFile a, b;
  ASSERT_EQ(writeCheckpointSection(dir, 9, 1, secs[1], &b), "");
  ASSERT_EQ(writeCheckpointSection(dir, 9, 0, secs[0], &a), "");
  EXPECT_FALSE(findLatestComplete(dir).latest); // not committed yet
  ASSERT_EQ(commitCheckpoint(dir, 9, {b, a}, {{"step_in_epoch", "3"}}), "");
  FindResult r = findLatestComplete(dir);
  ASSERT_TRUE(r.latest);
  EXPECT_EQ(r.latest->manifest.files[0].name, "section-0.safetensors");
  EXPECT_EQ(loadSection(*r.latest, 1).find("head.bias")->data, secs[1][1].data);
}

// A writer killed mid-write leaves its temporary file; the step written
// again (a resumed run) and committed loses it, and so does a kept
// checkpoint when pruning. An incomplete step keeps its files (a writer
// may still be at work).
TEST_F(TempDir, CommitRemovesKilledWritersTempFiles) {
  std::string dir = root + "/ckpt";
  auto secs = sections(2);
  ASSERT_EQ(writeCheckpointSection(dir, 7, 0, secs[0]), "");
  std::string left = dir + "/step-7/.section-1.safetensors.tmp.99999.0";
  std::ofstream(left) << "half a file";
  EXPECT_TRUE(fs::exists(left));
  CheckpointFile a, b;
  ASSERT_EQ(writeCheckpointSection(dir, 7, 0, secs[0], &a), "");
  ASSERT_EQ(writeCheckpointSection(dir, 7, 1, secs[1], &b), "");
  ASSERT_EQ(commitCheckpoint(dir, 7, {a, b}, {}), "");
  EXPECT_FALSE(fs::exists(left));
  EXPECT_TRUE(findLatestComplete(dir).latest);

  std::string kept = dir + "/step-7/.manifest.json.tmp.99998.3";
  std::string torn = dir + "/step-8/.COMPLETE.tmp.99997.1";
  fs::create_directories(dir + "/step-8");
  std::ofstream(kept) << "x";
  std::ofstream(torn) << "x";
  PruneResult p = keepLast(dir, 1);
  EXPECT_EQ(p.error, "");
  EXPECT_FALSE(fs::exists(kept));
  EXPECT_TRUE(fs::exists(torn));
}

// A torn write of a step with three sections, written again with two and
// committed: the third section's file, which the manifest does not list,
// goes (it stayed, looking like part of the checkpoint).
TEST_F(TempDir, CommitRemovesSectionFilesItDoesNotList) {
  std::string dir = root + "/ckpt";
  auto secs = sections(3); // two sections
  for (int k = 0; k < 3; ++k)
    ASSERT_EQ(writeCheckpointSection(dir, 4, k, secs[k % 2]), "");
  std::ofstream(dir + "/step-4/notes.txt") << "the user's";
  ASSERT_EQ(writeCheckpoint(dir, 4, secs, {}), "");
  EXPECT_TRUE(fs::exists(dir + "/step-4/section-1.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/step-4/section-2.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/step-4/notes.txt"));
  EXPECT_EQ(verifyCheckpoint(dir + "/step-4", 4), "");
}

// openCheckpoint (the ranks other than 0 on resume) checks the marker,
// the manifest and the sizes, and reads no section file: a flipped byte is
// found by loadSection when the file is read.
TEST_F(TempDir, OpenCheckpointReadsNoSectionFile) {
  std::string dir = root + "/ckpt";
  ASSERT_EQ(writeCheckpoint(dir, 5, sections(1), {}), "");
  CheckpointInfo info;
  EXPECT_EQ(openCheckpoint(dir, 5, &info), "");
  EXPECT_EQ(info.step, 5);
  EXPECT_EQ(info.manifest.files.size(), 2u);
  std::string err = openCheckpoint(dir, 6, &info);
  EXPECT_TRUE(contains(err, dir + "/step-6: torn")) << err;
  flipByte(dir + "/step-5/section-1.safetensors", 20);
  EXPECT_EQ(openCheckpoint(dir, 5, &info), "");
  EXPECT_NO_THROW(loadSection(info, 0));
  try {
    loadSection(info, 1);
    ADD_FAILURE() << "a flipped byte was loaded";
  } catch (const DataError &e) {
    EXPECT_TRUE(contains(e.what(), "checksum mismatch")) << e.what();
  }
  fs::resize_file(dir + "/step-5/section-0.safetensors", 10);
  err = openCheckpoint(dir, 5, &info);
  EXPECT_TRUE(contains(err, "section-0.safetensors truncated")) << err;
}

TEST_F(TempDir, KeepLastPrunesOlderOnly) {
  std::string dir = root + "/ckpt";
  for (int step : {1, 2, 3, 4, 5})
    ASSERT_EQ(writeCheckpoint(dir, step, sections(step), {}), "");
  fs::remove(dir + "/step-5/COMPLETE"); // maybe still being written
  fs::create_directory(dir + "/unrelated");
  EXPECT_FALSE(keepLast(dir, 0).error.empty());

  PruneResult p = keepLast(dir, 2);
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.removed.size(), 2u);
  for (const char *kept : {"step-3", "step-4", "step-5", "unrelated"})
    EXPECT_TRUE(fs::exists(dir + "/" + kept)) << kept;
  for (const char *gone : {"step-1", "step-2"})
    EXPECT_FALSE(fs::exists(dir + "/" + gone)) << gone;
  EXPECT_EQ(findLatestComplete(dir).latest->step, 4);

  // Fewer good checkpoints than asked for: nothing is deleted.
  p = keepLast(dir, 5);
  EXPECT_TRUE(p.removed.empty());
  EXPECT_TRUE(fs::exists(dir + "/step-3"));
}

// A commit's pruning checks the kept checkpoints by their files' sizes, not
// their contents (it read every kept one whole after each commit): a bit
// flip passes, a truncated file or a torn step does not.
TEST_F(TempDir, KeepLastWithoutReadingFiles) {
  std::string dir = root + "/ckpt";
  for (int step : {1, 2, 3, 4})
    ASSERT_EQ(writeCheckpoint(dir, step, sections(step), {}), "");
  std::string s4 = dir + "/step-4/section-0.safetensors";
  flipByte(s4, static_cast<std::streamoff>(fs::file_size(s4) - 5));
  EXPECT_EQ(verifyCheckpoint(dir + "/step-4", 4, nullptr, false), "");
  EXPECT_NE(verifyCheckpoint(dir + "/step-4", 4), "");
  std::string s3 = dir + "/step-3/section-1.safetensors";
  fs::resize_file(s3, fs::file_size(s3) - 3);
  EXPECT_TRUE(contains(verifyCheckpoint(dir + "/step-3", 3, nullptr, false),
                       "truncated"));
  // Kept: step-4 (sizes right) and step-2 (step-3 truncated); step-1 goes.
  PruneResult p = keepLast(dir, 2, /*readFiles=*/false);
  EXPECT_EQ(p.error, "");
  EXPECT_TRUE(fs::exists(dir + "/step-2") && fs::exists(dir + "/step-4"));
  EXPECT_FALSE(fs::exists(dir + "/step-1"));
}
