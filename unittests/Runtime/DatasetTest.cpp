//===- DatasetTest.cpp - .npy datasets, sample indexing, synthetic data ---===//

#include "varuna/runtime/Dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace varuna::rt;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

class DatasetTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/varuna-data-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }

  /// ids: int64 [n, 3] with row i = (10i, 10i+1, 10i+2); x: float32 [n, 2]
  /// with row i = (i, -i).
  void writeDefault(int64_t n, int64_t nx = -1) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < 3; ++j)
        ids.push_back(10 * i + j);
    writeNpy(dir + "/ids.npy", DType::I64, {n, 3}, ids.data());
    if (nx < 0)
      nx = n;
    std::vector<float> x;
    for (int64_t i = 0; i < nx; ++i) {
      x.push_back(static_cast<float>(i));
      x.push_back(-static_cast<float>(i));
    }
    writeNpy(dir + "/x.npy", DType::F32, {nx, 2}, x.data());
  }

  std::vector<InputSpec> specs() const {
    return {{"ids", DType::I64, {3}}, {"x", DType::F32, {2}}};
  }

  std::string openError(const std::vector<InputSpec> &s) {
    try {
      NpyDataset::open(dir, s);
    } catch (const DataError &e) {
      return e.what();
    }
    return "";
  }

  std::string dir;
};

/// The sample index of each row of an ids batch (row i starts with 10i).
std::vector<int64_t> rowsOf(const BatchTensor &ids) {
  std::vector<int64_t> out;
  const auto *p = reinterpret_cast<const int64_t *>(ids.array.data.data());
  for (int64_t r = 0; r < ids.array.shape[0]; ++r)
    out.push_back(p[r * 3] / 10);
  return out;
}

} // namespace

TEST_F(DatasetTest, OpensAndReadsRows) {
  writeDefault(10);
  auto ds = NpyDataset::open(dir, specs());
  EXPECT_EQ(ds->numSamples(), 10);
  auto b = ds->batch(1, 4, 1, 2); // samples 5, 6
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].name, "ids");
  EXPECT_EQ(b[0].array.dtype, DType::I64);
  EXPECT_EQ(b[0].array.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(rowsOf(b[0]), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(b[1].array.shape, (std::vector<int64_t>{2, 2}));
  const auto *x = reinterpret_cast<const float *>(b[1].array.data.data());
  EXPECT_EQ(std::vector<float>(x, x + 4), (std::vector<float>{5, -5, 6, -6}));
}

TEST_F(DatasetTest, ReadsOnlyTheWantedInputs) {
  writeDefault(10);
  auto ds = NpyDataset::open(dir, specs());
  auto b = ds->batch(1, 4, 1, 2, {false, true}); // samples 5, 6; x only
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].name, "ids");
  EXPECT_TRUE(b[0].array.shape.empty());
  EXPECT_TRUE(b[0].array.data.empty());
  EXPECT_EQ(b[1].array.shape, (std::vector<int64_t>{2, 2}));
  const auto *x = reinterpret_cast<const float *>(b[1].array.data.data());
  EXPECT_EQ(std::vector<float>(x, x + 4), (std::vector<float>{5, -5, 6, -6}));
}

TEST_F(DatasetTest, WrapsAroundTheSampleCount) {
  writeDefault(10);
  auto ds = NpyDataset::open(dir, specs());
  EXPECT_EQ(rowsOf(ds->batch(2, 4, 0, 4)[0]),
            (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(rowsOf(ds->batch(3, 4, 1, 2)[0]), (std::vector<int64_t>{3, 4}));
  // A global batch larger than the dataset wraps more than once.
  EXPECT_EQ(rowsOf(ds->batch(1, 23, 0, 23)[0]).front(), 3);
  EXPECT_EQ(rowsOf(ds->batch(1, 23, 0, 23)[0]).back(), 5);
  // Huge steps do not overflow.
  int64_t big = int64_t(1) << 61;
  EXPECT_EQ(
      ds->sampleIndex(big, 1024, 0, 0),
      static_cast<int64_t>((static_cast<unsigned __int128>(big) * 1024) % 10));
}

TEST_F(DatasetTest, EveryConfigurationSeesTheSameSamples) {
  // Global batch M = 12 on 7 samples: whatever D (replicas) and Nm
  // (micro-batches per replica) are, the slices [offset, offset + m) of a step
  // concatenate to the same global batch.
  writeDefault(7);
  auto ds = NpyDataset::open(dir, specs());
  const int64_t M = 12;
  for (int64_t step : {0, 1, 5}) {
    std::vector<int64_t> whole = rowsOf(ds->batch(step, M, 0, M)[0]);
    for (int64_t D : {1, 2, 3})
      for (int64_t Nm : {1, 2, 4}) {
        if (M % (D * Nm))
          continue;
        int64_t m = M / (D * Nm);
        std::vector<int64_t> seen;
        for (int64_t r = 0; r < D; ++r)
          for (int64_t k = 0; k < Nm; ++k) {
            auto part = rowsOf(ds->batch(step, M, (r * Nm + k) * m, m)[0]);
            seen.insert(seen.end(), part.begin(), part.end());
          }
        EXPECT_EQ(seen, whole) << "step " << step << " D " << D << " Nm " << Nm;
      }
  }
}

TEST_F(DatasetTest, BadBatchRequests) {
  writeDefault(4);
  auto ds = NpyDataset::open(dir, specs());
  EXPECT_THROW(ds->batch(0, 4, 3, 2), DataError); // past the global batch
  EXPECT_THROW(ds->batch(-1, 4, 0, 1), DataError);
  EXPECT_THROW(ds->batch(0, 0, 0, 0), DataError);
}

TEST_F(DatasetTest, MissingFile) {
  writeDefault(4);
  auto s = specs();
  s.push_back({"labels", DType::I64, {}});
  std::string err = openError(s);
  EXPECT_TRUE(contains(err, dir + "/labels.npy: missing")) << err;
  EXPECT_TRUE(contains(err, "int64 [N]")) << err;
  EXPECT_FALSE(contains(err, "also holds")) << err; // ids.npy, x.npy: used
  // The same labels under another name: pointed out.
  std::vector<int64_t> targets = {1, 2, 3, 4};
  writeNpy(dir + "/targets.npy", DType::I64, {4}, targets.data());
  err = openError(s);
  EXPECT_TRUE(contains(err, "-- the directory also holds targets.npy, named "
                            "for no input (the inputs: ids, x, labels)"))
      << err;
  EXPECT_EQ(openError(specs()), "");
  fs::remove_all(dir + "-nope");
  std::string dirErr;
  try {
    NpyDataset::open(dir + "-nope", specs());
  } catch (const DataError &e) {
    dirErr = e.what();
  }
  EXPECT_TRUE(contains(dirErr, "data directory does not exist")) << dirErr;
}

TEST_F(DatasetTest, WrongDtype) {
  writeDefault(4);
  auto s = specs();
  s[0].dtype = DType::I32;
  std::string err = openError(s);
  EXPECT_TRUE(contains(err, dir + "/ids.npy: dtype is int64, expected int32"))
      << err;
}

TEST_F(DatasetTest, NarrowerIntegersAreWidened) {
  // Token ids as uint16 (values above int16's range), labels as int8 with a
  // negative (ignore_index-like) value, wrapping across the sample count.
  std::vector<uint16_t> ids = {65535, 1, 40000, 7, 0, 32768};
  std::vector<int8_t> labels = {-100, 5, 127, -1, 3, 0};
  writeNpy(dir + "/ids.npy", DType::U16, {3, 2}, ids.data());
  writeNpy(dir + "/labels.npy", DType::I8, {3, 2}, labels.data());
  std::vector<InputSpec> s = {{"ids", DType::I64, {2}},
                              {"labels", DType::I32, {2}}};
  auto ds = NpyDataset::open(dir, s);
  auto b = ds->batch(1, 2, 0, 2); // samples 2, 0
  EXPECT_EQ(b[0].array.dtype, DType::I64);
  EXPECT_EQ(b[0].array.data.size(), 4 * sizeof(int64_t));
  const auto *i = reinterpret_cast<const int64_t *>(b[0].array.data.data());
  EXPECT_EQ(std::vector<int64_t>(i, i + 4),
            (std::vector<int64_t>{0, 32768, 65535, 1}));
  EXPECT_EQ(b[1].array.dtype, DType::I32);
  const auto *l = reinterpret_cast<const int32_t *>(b[1].array.data.data());
  EXPECT_EQ(std::vector<int32_t>(l, l + 4),
            (std::vector<int32_t>{3, 0, -100, 5}));
}

TEST_F(DatasetTest, OnlyLosslessConversions) {
  std::vector<uint32_t> u32 = {1, 2, 3};
  writeNpy(dir + "/ids.npy", DType::U32, {3, 1}, u32.data());
  std::string err = openError({{"ids", DType::I32, {1}}});
  EXPECT_TRUE(contains(err, "dtype is uint32, expected int32 for input 'ids' "
                            "(int32 [N, 1]): integer data of a type whose "
                            "values all fit is converted (int8, uint8, int16, "
                            "uint16); this one needs x.astype(np.int32)"))
      << err;
  std::vector<double> f64 = {1, 2, 3};
  writeNpy(dir + "/x.npy", DType::F64, {3, 1}, f64.data());
  err = openError({{"x", DType::F32, {1}}});
  EXPECT_TRUE(contains(err, "dtype is float64, expected float32 for input 'x' "
                            "(float32 [N, 1]): save it with "
                            "x.astype(np.float32)"))
      << err;
  std::vector<uint8_t> u8 = {0, 1, 1};
  writeNpy(dir + "/m.npy", DType::U8, {3, 1}, u8.data());
  err = openError({{"m", DType::Bool, {1}}});
  EXPECT_TRUE(contains(err, "dtype is uint8, expected bool")) << err;
}

TEST_F(DatasetTest, WrongSampleShape) {
  writeDefault(4);
  auto s = specs();
  s[1].sampleShape = {3};
  std::string err = openError(s);
  EXPECT_TRUE(contains(err, dir + "/x.npy: shape [4, 2] does not match "
                                  "float32 [N, 3]"))
      << err;
  s[1].sampleShape = {2, 1};
  EXPECT_TRUE(contains(openError(s), "does not match float32 [N, 2, 1]"));
  // -1 accepts any size and is resolved from the file.
  s[1].sampleShape = {-1};
  auto ds = NpyDataset::open(dir, s);
  EXPECT_EQ(ds->specs()[1].sampleShape, (std::vector<int64_t>{2}));
  EXPECT_EQ(ds->batch(0, 2, 0, 2)[1].array.shape, (std::vector<int64_t>{2, 2}));
}

TEST_F(DatasetTest, DifferentSampleCounts) {
  writeDefault(4, 5);
  std::string err = openError(specs());
  EXPECT_TRUE(contains(err, dir + "/x.npy: has 5 samples but " + dir +
                                "/ids.npy has 4"))
      << err;
}

TEST_F(DatasetTest, TruncatedAndScalarFiles) {
  writeDefault(4);
  fs::resize_file(dir + "/x.npy", fs::file_size(dir + "/x.npy") - 4);
  std::string err = openError(specs());
  EXPECT_TRUE(contains(err, dir + "/x.npy: truncated .npy data")) << err;

  int64_t one = 1;
  writeNpy(dir + "/ids.npy", DType::I64, {}, &one);
  err = openError({{"ids", DType::I64, {}}});
  EXPECT_TRUE(contains(err, "0-d array")) << err;

  std::ofstream(dir + "/junk.npy") << "not numpy";
  err = openError({{"junk", DType::F32, {}}});
  EXPECT_TRUE(contains(err, dir + "/junk.npy: not a .npy file")) << err;
}

/// A version 1.0 .npy file with `dict` as its header, then `dataBytes` zero
/// bytes.
static void writeRawNpy(const std::string &path, std::string dict,
                        size_t dataBytes) {
  while ((10 + dict.size() + 1) % 64)
    dict += ' ';
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  char len[2] = {static_cast<char>(dict.size() & 0xff),
                 static_cast<char>(dict.size() >> 8)};
  out.write(len, 2);
  out << dict << std::string(dataBytes, '\0');
}

// Both readers (the dataset's header-only one and readNpy) read a header the
// same way: numpy's rules, one parser.
TEST_F(DatasetTest, HeadersReadAsNumpyDoes) {
  auto bothErrors = [&](const std::string &dict, size_t bytes) {
    writeRawNpy(dir + "/x.npy", dict, bytes);
    std::string viaRead;
    try {
      readNpy(dir + "/x.npy");
    } catch (const DataError &e) {
      viaRead = e.what();
    }
    return std::make_pair(openError({{"x", DType::F32, {2}}}), viaRead);
  };
  // A repeated key: the last value counts (Python's dict literal).
  auto [open1, read1] = bothErrors(
      "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), "
      "'descr': '<f4', }", 24);
  EXPECT_EQ(open1, "") << open1;
  EXPECT_EQ(read1, "") << read1;
  EXPECT_EQ(readNpy(dir + "/x.npy").dtype, DType::F32);
  // A structured dtype is named as such (it was "unsupported dtype 'a'").
  auto [open2, read2] = bothErrors(
      "{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, "
      "'shape': (3,), }", 24);
  for (const std::string &e : {open2, read2})
    EXPECT_TRUE(contains(e, "structured dtypes are not supported")) << e;
  // A dimension past int64 (std::stoll threw out_of_range in readNpy).
  auto [open3, read3] = bothErrors(
      "{'descr': '<f4', 'fortran_order': False, "
      "'shape': (99999999999999999999, 2), }", 0);
  for (const std::string &e : {open3, read3})
    EXPECT_TRUE(contains(e, "dimension too large")) << e;
  // A size past 2^62 bytes, refused before any data is read.
  auto [open4, read4] = bothErrors(
      "{'descr': '<f4', 'fortran_order': False, "
      "'shape': (1152921504606846976, 2), }", 0);
  for (const std::string &e : {open4, read4})
    EXPECT_TRUE(contains(e, "is too large")) << e;
}

TEST(SyntheticDataset, DeterministicAndSliceConsistent) {
  std::vector<InputSpec> s = {{"input_ids", DType::I64, {8}, 50},
                              {"pixels", DType::F32, {4}},
                              {"mask", DType::Bool, {3}}};
  SyntheticDataset a(42, s), b(42, s), c(43, s);
  auto whole = a.batch(3, 8, 0, 8);
  EXPECT_EQ(whole[0].array.data, b.batch(3, 8, 0, 8)[0].array.data);
  EXPECT_NE(whole[0].array.data, c.batch(3, 8, 0, 8)[0].array.data);
  EXPECT_NE(whole[1].array.data, a.batch(4, 8, 0, 8)[1].array.data);
  // A slice equals the same rows of the whole batch.
  auto part = a.batch(3, 8, 5, 3);
  for (size_t i = 0; i < s.size(); ++i) {
    size_t row = whole[i].array.data.size() / 8;
    std::vector<uint8_t> want(whole[i].array.data.begin() + 5 * row,
                              whole[i].array.data.end());
    EXPECT_EQ(part[i].array.data, want) << s[i].name;
  }
  const auto *ids =
      reinterpret_cast<const int64_t *>(whole[0].array.data.data());
  for (int i = 0; i < 64; ++i)
    EXPECT_TRUE(ids[i] >= 0 && ids[i] < 50) << ids[i];
  for (uint8_t m : whole[2].array.data)
    EXPECT_LE(m, 1);
}

TEST(SyntheticDataset, FloatsAreStandardNormal) {
  SyntheticDataset ds(7, {{"x", DType::F32, {100}}});
  auto b = ds.batch(0, 100, 0, 100);
  const auto *x = reinterpret_cast<const float *>(b[0].array.data.data());
  double sum = 0, sq = 0;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(std::isfinite(x[i]));
    sum += x[i];
    sq += double(x[i]) * x[i];
  }
  double mean = sum / 10000, var = sq / 10000 - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.05);

  SyntheticDataset half(7, {{"h", DType::F16, {4}}, {"d", DType::F64, {4}}});
  auto hb = half.batch(0, 2, 0, 2);
  EXPECT_EQ(hb[0].array.data.size(), 16u);
  EXPECT_EQ(hb[1].array.data.size(), 64u);
}

TEST(SyntheticDataset, RejectsBadSpecs) {
  EXPECT_THROW(SyntheticDataset(1, {{"x", DType::F32, {-1}}}), DataError);
  EXPECT_THROW(SyntheticDataset(1, {{"t", DType::I8, {2}, 1000}}), DataError);
  SyntheticDataset epoch(1, {{"t", DType::I32, {2}, 9}}, 5);
  EXPECT_EQ(epoch.batch(1, 5, 0, 5)[0].array.data,
            epoch.batch(0, 5, 0, 5)[0].array.data); // repeats after 5 samples
}
