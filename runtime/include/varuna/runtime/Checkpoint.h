//===- Checkpoint.h - Atomic, verifiable training checkpoints ---*- C++ -*-===//
//
// Layout (docs/checkpoints.md):
//
//   CKPT_DIR/step-<N>/section-<k>.safetensors   one per compiler section
//   CKPT_DIR/step-<N>/manifest.json             step, files (bytes, CRC32),
//                                               free-form training state
//   CKPT_DIR/step-<N>/COMPLETE                  written last
//
// A section file holds the section's parameters under their framework names
// plus optimizer state tensors (`optimizer/<state>/<parameter>`). Because the
// unit is the section, not the stage, a checkpoint written under one P x D
// loads under any other. With data parallelism the replicas hold identical
// copies, so each section file is written by exactly one replica (by
// convention replica `section % D` of the stage holding it); any rank may call
// writeCheckpointSection for the sections it owns, and one rank calls
// commitCheckpoint after a barrier.
//
// Every file is written atomically (temp file in the same directory, write,
// fsync, rename, fsync the directory), and COMPLETE is written only after the
// manifest, so a crash at any point leaves either the previous complete
// checkpoint or a directory that findLatestComplete rejects. No dependency on
// libtorch.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_CHECKPOINT_H
#define VARUNA_RUNTIME_CHECKPOINT_H

#include "varuna/runtime/Safetensors.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace varuna::rt {

/// Free-form training state stored in the manifest (loss scale, RNG seeds,
/// optimizer step count, data position, ...). Values are strings so 64-bit
/// seeds survive exactly; print floats with `%.17g`.
using TrainingState = std::map<std::string, std::string>;

/// One file of a checkpoint as the manifest records it.
struct CheckpointFile {
  std::string name; ///< relative to the step directory
  int section = -1; ///< the section index, -1 for other files
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// The parsed manifest.json.
struct CheckpointManifest {
  int64_t step = 0;
  std::vector<CheckpointFile> files;
  TrainingState state;
};

/// A verified, complete checkpoint.
struct CheckpointInfo {
  int64_t step = 0;
  std::string path; ///< CKPT_DIR/step-<N>
  CheckpointManifest manifest;

  /// The manifest entry of section `k`, or nullptr.
  const CheckpointFile *sectionFile(int k) const;
};

/// `step-<N>`, `section-<k>.safetensors`.
std::string checkpointStepDirName(int64_t step);
std::string checkpointSectionFileName(int section);
/// The name of an optimizer state tensor: `optimizer/<state>/<param>` (slashes
/// never occur in PyTorch parameter names).
std::string optimizerStateTensorName(const std::string &param,
                                     const std::string &state);
/// The name of a frozen parameter training never changes (an attention
/// mask, a frozen layer), kept so that a resume needs nothing from the
/// model file: `frozen/<param>` (its name may hold slashes: ONNX constants).
std::string frozenTensorName(const std::string &param);

/// CRC-32 (zlib's polynomial, the one Python's `zlib.crc32` computes).
uint32_t crc32Of(const void *data, size_t size, uint32_t crc = 0);

/// Writes `dir/name` atomically: a temp file in `dir`, write, fsync, rename,
/// fsync `dir`. Returns "" on success, else an error naming the path and the
/// cause; on failure the temp file is removed and `dir/name` is untouched.
std::string writeFileAtomically(const std::string &dir, const std::string &name,
                                const void *data, size_t size);
/// The same, the file being `pieces` (pointer, size) one after another.
std::string writeFileAtomically(
    const std::string &dir, const std::string &name,
    const std::vector<std::pair<const uint8_t *, size_t>> &pieces);

/// Writes section `section` of checkpoint `step` (creating CKPT_DIR and
/// step-<N> as needed, and removing a stale COMPLETE marker of a previous
/// attempt at the same step first). `metadata` goes into the safetensors
/// `__metadata__` (the writer adds `varuna.step` and `varuna.section`). On
/// success fills `*written` (if given) for commitCheckpoint and returns "".
std::string writeCheckpointSection(const std::string &ckptDir, int64_t step,
                                   int section,
                                   const std::vector<TensorBytes> &tensors,
                                   CheckpointFile *written = nullptr,
                                   const SafetensorsMetadata &metadata = {});

/// After every section file of `step` is written (by whichever ranks own
/// them): checks each listed file's size on disk, writes manifest.json, then
/// COMPLETE, then removes what killed writers of the step left there (their
/// `.<name>.tmp.<pid>.<n>` files: a run killed while writing the step,
/// resumed, writes it again). Returns "" or an error (and then writes no
/// marker).
std::string commitCheckpoint(const std::string &ckptDir, int64_t step,
                             const std::vector<CheckpointFile> &files,
                             const TrainingState &state);

/// Single-process convenience: writes every section, then commits.
/// `sections[k]` is section k's tensor set.
std::string
writeCheckpoint(const std::string &ckptDir, int64_t step,
                const std::vector<std::vector<TensorBytes>> &sections,
                const TrainingState &state);

/// Verifies one step directory: COMPLETE present and naming the manifest's
/// CRC, manifest well-formed and for this step, every file present with the
/// recorded size and CRC. Returns "" if good, else why not ("torn: no COMPLETE
/// marker", "section-1.safetensors truncated: ...", "... checksum mismatch").
/// Without `readFiles`, the files' sizes only (no file is read: what a
/// commit's pruning checks, which read every kept checkpoint whole after
/// each commit -- 17.5 GB for five steps of a 1.3 GB model keeping 3).
std::string verifyCheckpoint(const std::string &stepDir, int64_t step,
                             CheckpointManifest *manifest = nullptr,
                             bool readFiles = true);

struct FindResult {
  std::optional<CheckpointInfo> latest; ///< none: start from scratch
  /// One line per newer checkpoint that was skipped: "step-7: torn: ...".
  std::vector<std::string> warnings;
  std::string error; ///< CKPT_DIR exists but cannot be listed
};

/// Whether CKPT_DIR/step-<step> holds its COMPLETE marker (committed).
bool isCommitted(const std::string &ckptDir, int64_t step);

/// The newest step of CKPT_DIR whose directory holds its COMPLETE marker
/// (committed), without reading or verifying any file; none when there is
/// none, or CKPT_DIR is missing or cannot be listed.
std::optional<int64_t> newestCommittedStep(const std::string &ckptDir);

/// Scans CKPT_DIR/step-* from the newest step down and returns the newest
/// checkpoint that verifies. Reads every file once (CRC). A missing CKPT_DIR
/// is not an error (no checkpoint yet).
FindResult findLatestComplete(const std::string &ckptDir);

/// One step directory of CKPT_DIR as listCheckpoints found it.
struct StepDirectory {
  int64_t step = 0;
  std::string path;            ///< CKPT_DIR/step-<N>
  std::string problem;         ///< "" if it verified, else verifyCheckpoint's
  CheckpointManifest manifest; ///< filled only when it verified
};

/// Every step directory of CKPT_DIR, newest first, each checked by
/// verifyCheckpoint (`readFiles` as its: false checks the files' sizes only).
/// Returns "" (a missing CKPT_DIR lists nothing) or why CKPT_DIR cannot be
/// listed. What `varuna-ckpt list` and `verify` print.
std::string listCheckpoints(const std::string &ckptDir, bool readFiles,
                            std::vector<StepDirectory> *out);

/// The committed checkpoint CKPT_DIR/step-<step>, checked by its marker,
/// manifest and file sizes only (no file is read: loadSection checks each
/// file it reads). Returns "" and fills `out`, or why not (as
/// verifyCheckpoint's, after the directory's path).
std::string openCheckpoint(const std::string &ckptDir, int64_t step,
                           CheckpointInfo *out);

/// Reads section `k` of a verified checkpoint, checking its size and CRC
/// against the manifest again. Throws DataError naming the file.
SafetensorsFile loadSection(const CheckpointInfo &ckpt, int section);

struct PruneResult {
  std::vector<std::string> removed; ///< step directories deleted
  std::string error;
};

/// Removes every torn (uncommitted) step directory of CKPT_DIR newer than
/// `step` (a run that resumes from `step` rewrites those steps, and a full
/// disk stayed full of them); committed ones that failed to verify stay (a
/// read error of the moment must not delete a good checkpoint). Only when
/// nothing else writes there: after a resume, before training.
PruneResult removeNewerThan(const std::string &ckptDir, int64_t step);

/// Keeps the newest `n` (>= 1) checkpoints that verify and deletes every step
/// directory older than the oldest of them (complete, torn or corrupt).
/// Directories newer than the newest good checkpoint are left alone (a write
/// may be in progress). A directory's COMPLETE marker is removed first, so a
/// half-deleted directory never looks complete. The kept checkpoints lose
/// killed writers' temporary files (as commitCheckpoint).
/// `readFiles`: as verifyCheckpoint's (false: by their sizes only).
PruneResult keepLast(const std::string &ckptDir, int n, bool readFiles = true);

/// Makes this process the one run writing CKPT_DIR (which must exist):
/// an exclusive lock on CKPT_DIR/.varuna-run.lock, held until the process
/// exits, the file naming its pid and host. Returns "" or why not: another
/// run holds it ("... is in use by another run (pid 123 on host h) ...")
/// or the file cannot be opened or locked. Two runs writing one directory
/// (a restart script firing while the old run lives, the same command
/// started twice with --resume) wrote each other's steps.
std::string lockCheckpointDirectory(const std::string &ckptDir);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_CHECKPOINT_H
