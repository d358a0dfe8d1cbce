//===- Dataset.h - Training data: .npy directories, synthetic ---*- C++ -*-===//
//
// `--data DIR` holds one `<input name>.npy` per graph input the rank reads
// (stage 0 its inputs, the last stage its labels); the first dimension
// indexes samples, the rest must equal the input's shape after the batch
// dimension. Step `s` of a run with global batch M uses the global samples
// [s*M, (s+1)*M) modulo the sample count, whatever P, D and Nm are; a replica's
// micro-batch is the slice [offset, offset + m) of that. See docs/data.md.
//
// Batches are raw bytes + shape (NpyArray), no dependency on libtorch. Rows
// are read with pread(2) on demand, so datasets larger than memory work.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_DATASET_H
#define VARUNA_RUNTIME_DATASET_H

#include "varuna/runtime/Npy.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace varuna::rt {

/// What the graph expects of one input.
struct InputSpec {
  std::string name;
  DType dtype = DType::F32;
  /// The shape after the batch dimension; -1 accepts any size in that place.
  std::vector<int64_t> sampleShape;
  /// SyntheticDataset only: integer inputs are drawn from [0, vocab) (0: the
  /// full non-negative range of the type, capped at 2^31). Ignored for floats.
  int64_t vocab = 0;
};

/// How many non-negative values an integer type holds (2 for bool, 256 for
/// uint8), capped at 2^31: the largest vocab a synthetic input of it takes.
int64_t typeRange(DType t);

/// One input's slice of a batch.
struct BatchTensor {
  std::string name;
  NpyArray array; ///< shape [m, sampleShape...]
};

/// A source of training samples indexed by global sample number.
class DataSource {
public:
  virtual ~DataSource();

  const std::vector<InputSpec> &specs() const { return inputSpecs; }

  /// The rows of global samples [step*M + offset, step*M + offset + m)
  /// modulo numSamples(), one BatchTensor per spec, in spec order. Requires
  /// step >= 0, M > 0, m > 0 and 0 <= offset, offset + m <= M; throws
  /// DataError otherwise (or on a read error).
  std::vector<BatchTensor> batch(int64_t step, int64_t M, int64_t offset,
                                 int64_t m) const;
  /// The same, reading only the inputs i with wanted[i]; the others come
  /// back named but empty (no shape, no bytes).
  std::vector<BatchTensor> batch(int64_t step, int64_t M, int64_t offset,
                                 int64_t m,
                                 const std::vector<bool> &wanted) const;

  /// How many distinct samples there are (batch() wraps around after them).
  virtual int64_t numSamples() const = 0;

  /// The global sample index that row `j` of batch(step, M, offset, ...)
  /// holds: (step*M + offset + j) mod numSamples(), without overflow.
  int64_t sampleIndex(int64_t step, int64_t M, int64_t offset, int64_t j) const;

protected:
  explicit DataSource(std::vector<InputSpec> specs)
      : inputSpecs(std::move(specs)) {}
  /// Writes sample `index`'s row of input `input` (rowBytes(input) bytes).
  virtual void readRow(size_t input, int64_t index, uint8_t *dst) const = 0;
  /// Writes `count` consecutive rows starting at `index` (no wrap-around);
  /// the default calls readRow per row.
  virtual void readRows(size_t input, int64_t index, int64_t count,
                        uint8_t *dst) const;
  /// Bytes per sample of input `input` (with -1 dims resolved).
  size_t rowBytes(size_t input) const;

  std::vector<InputSpec> inputSpecs; ///< -1 dims resolved by subclasses
};

/// DIR/<name>.npy per input, validated when opened.
class NpyDataset : public DataSource {
public:
  /// Opens and validates every input's file. An integer file of a narrower
  /// type than its integer input (every value fits: token ids saved as
  /// uint16 or int32 for an int64 input) is widened as rows are read. Throws
  /// DataError naming the file and the expectation on: a missing directory
  /// or file, a malformed or truncated .npy, a 0-d array, another dtype
  /// (floats and bools are never converted), a sample
  /// shape other than the spec's, no samples, or sample counts that differ
  /// between inputs.
  static std::unique_ptr<NpyDataset> open(const std::string &dir,
                                          const std::vector<InputSpec> &specs);
  ~NpyDataset() override;

  int64_t numSamples() const override { return samples; }
  /// DIR/<name>.npy of input `input`.
  const std::string &path(size_t input) const { return files[input].path; }

private:
  struct File {
    std::string path;
    int fd = -1;
    uint64_t dataOffset = 0;
    DType dtype = DType::F32; ///< the file's (widened to the spec's on read)
  };
  NpyDataset(std::vector<InputSpec> specs, std::vector<File> files,
             int64_t samples)
      : DataSource(std::move(specs)), files(std::move(files)),
        samples(samples) {}
  void readRow(size_t input, int64_t index, uint8_t *dst) const override;
  void readRows(size_t input, int64_t index, int64_t count,
                uint8_t *dst) const override;
  /// The file's bytes of those rows, in the file's dtype.
  void readFileRows(size_t input, int64_t index, int64_t count,
                    uint8_t *dst) const;

  std::vector<File> files;
  int64_t samples;
};

/// SplitMix64's finalizer: a well-mixed 64-bit hash of `z` (seeds derived
/// from several numbers, synthetic values).
uint64_t mix64(uint64_t z);

/// Deterministic pseudo-random samples: each value is a function of (seed,
/// input name, global sample index, position) only, so every P x D sees the
/// same data. Integer inputs (and bool, as 0/1) are uniform in [0, vocab);
/// float inputs are standard normal. `sampleShape` must not contain -1.
class SyntheticDataset : public DataSource {
public:
  /// `numSamples` > 0 makes the data repeat after that many samples (epochs);
  /// 0 means 2^62 distinct samples.
  SyntheticDataset(uint64_t seed, std::vector<InputSpec> specs,
                   int64_t numSamples = 0);

  int64_t numSamples() const override { return samples; }

private:
  void readRow(size_t input, int64_t index, uint8_t *dst) const override;

  uint64_t seed;
  std::vector<uint64_t> nameHashes;
  int64_t samples;
};

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_DATASET_H
