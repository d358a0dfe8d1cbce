//===- CompiledSections.cpp - A job's generated stage library -------------===//

#include "varuna/Target/ATen/CompiledSections.h"
#include "varuna/Target/ATen/ReferenceTrainer.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Compiler/BuildStages.h"
#include "varuna/runtime/StageBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fstream>

using namespace mlir;

namespace varuna {

/// Why the file at `path` cannot be a whole 64-bit ELF shared library, or
/// empty. dlopen maps a truncated library's segments past the end of the
/// file and the process dies of SIGBUS when they are touched; so the
/// header, the program and section header tables and every loaded segment
/// must lie within the file.
static std::string truncatedElf(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ""; // dlopen says why
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  uint64_t size = bytes.size();
  Elf64_Ehdr h;
  if (size < sizeof h || bytes.compare(0, SELFMAG, ELFMAG) != 0)
    return "not an ELF file (" + std::to_string(size) + " bytes)";
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.e_ident[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF file";
  auto past = [&](uint64_t off, uint64_t len) {
    return off > size || len > size - off;
  };
  if (past(h.e_phoff, uint64_t(h.e_phnum) * h.e_phentsize) ||
      past(h.e_shoff, uint64_t(h.e_shnum) * h.e_shentsize) ||
      h.e_phentsize < sizeof(Elf64_Phdr))
    return "truncated (" + std::to_string(size) +
           " bytes; its header tables end past the file)";
  for (unsigned i = 0; i < h.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + h.e_phoff + uint64_t(i) * h.e_phentsize,
                sizeof ph);
    if (ph.p_type == PT_LOAD && past(ph.p_offset, ph.p_filesz))
      return "truncated (" + std::to_string(size) +
             " bytes; a loaded segment ends at byte " +
             std::to_string(ph.p_offset + ph.p_filesz) + ")";
  }
  return "";
}

FailureOr<std::shared_ptr<const CompiledSections>>
CompiledSections::load(ModuleOp module, const std::string &libraryPath) {
  auto err = [&](const Twine &msg) {
    jobError(module, "stage library '") << libraryPath << "': " << msg;
    return failure();
  };
  // Kept loaded for the life of the process (its cached constants are
  // tensors that must not outlive the code that owns them).
  if (std::string why = truncatedElf(libraryPath); !why.empty())
    return err(why + ": re-run varuna-compile");
  void *handle = dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return err(Twine("cannot load: ") + dlerror());
  auto fn = reinterpret_cast<varuna_stage_job_table_fn>(
      dlsym(handle, "varuna_stage_job_table"));
  if (!fn)
    return err("does not export varuna_stage_job_table (not a stage library)");
  auto out = std::make_shared<CompiledSections>();
  out->table = fn();
  out->path = libraryPath;
  const stage::JobTable &t = *out->table;
  if (t.abiVersion != stage::kAbiVersion)
    return err("built for stage ABI " + Twine(t.abiVersion) +
               ", this runtime has " + Twine(stage::kAbiVersion) +
               ": re-run varuna-compile");
  std::string hash = jobHashOf(module);
  if (hash != t.jobHash)
    return err("was generated from another job.mlir (hash " +
               Twine(t.jobHash) + ", this job " + hash +
               "): re-run varuna-compile");

  FailureOr<SmallVector<func::FuncOp>> found = getSections(module);
  if (failed(found))
    return failure();
  SmallVector<func::FuncOp> &sections = *found;
  if (sections.size() != static_cast<size_t>(t.numSections))
    return err("has " + Twine(t.numSections) + " sections, the job " +
               Twine(sections.size()));
  for (auto [k, f] : llvm::enumerate(sections)) {
    const stage::SectionEntry &e = t.sections[k];
    if (f.getSymName() != e.name ||
        f.getNumArguments() != static_cast<unsigned>(e.numArgs) ||
        f.getNumResults() != static_cast<unsigned>(e.numResults))
      return err("section " + Twine(k) + " is @" + Twine(e.name) + " with " +
                 Twine(e.numArgs) + " arguments and " + Twine(e.numResults) +
                 " results, the job's is @" + f.getSymName() + " with " +
                 Twine(f.getNumArguments()) + " and " +
                 Twine(f.getNumResults()));
    std::vector<std::string> names;
    for (int i = 0; i < e.numParams; ++i) {
      if (!SymbolTable::lookupSymbolIn(module, e.params[i]))
        return err("section @" + Twine(e.name) + " reads parameter @" +
                   e.params[i] + ", which the job does not have");
      names.push_back(e.params[i]);
    }
    out->paramNames.push_back(std::move(names));
  }
  return std::shared_ptr<const CompiledSections>(std::move(out));
}

unsigned CompiledSections::numBodies() const { return table->numBodies; }

std::vector<at::Tensor>
CompiledSections::run(unsigned k, llvm::ArrayRef<at::Tensor> args,
                      llvm::ArrayRef<at::Tensor> params, int64_t batch,
                      at::Generator &generator, double *lossCount) const {
  const stage::SectionEntry &e = table->sections[k];
  std::vector<stage::Tensor> a, p, r(e.numResults);
  a.reserve(args.size());
  for (const at::Tensor &t : args)
    a.push_back(stage::fromATen(t));
  p.reserve(params.size());
  for (const at::Tensor &t : params)
    p.push_back(stage::fromATen(t));
  stage::Context ctx;
  ctx.batch = batch;
  ctx.generator = &generator;
  ctx.countLoss = lossCount != nullptr;
  try {
    e.fn(ctx, a.data(), p.data(), r.data());
  } catch (const std::exception &ex) {
    throw std::runtime_error("generated @" + std::string(e.name) + " (" +
                             path + "): " + ex.what());
  }
  if (lossCount && ctx.lossCount >= 0)
    *lossCount = ctx.lossCount;
  std::vector<at::Tensor> out;
  out.reserve(r.size());
  for (const stage::Tensor &t : r)
    out.push_back(stage::toATen(t));
  return out;
}

} // namespace varuna
