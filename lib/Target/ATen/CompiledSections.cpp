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

#include <dlfcn.h>

using namespace mlir;

namespace varuna {

FailureOr<std::shared_ptr<const CompiledSections>>
CompiledSections::load(ModuleOp module, const std::string &libraryPath) {
  auto err = [&](const Twine &msg) {
    jobError(module, "stage library '") << libraryPath << "': " << msg;
    return failure();
  };
  // Kept loaded for the life of the process (its cached constants are
  // tensors that must not outlive the code that owns them).
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
                      at::Generator &generator, double &lossCount) const {
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
  try {
    e.fn(ctx, a.data(), p.data(), r.data());
  } catch (const std::exception &ex) {
    throw std::runtime_error("generated @" + std::string(e.name) + " (" +
                             path + "): " + ex.what());
  }
  if (ctx.lossCount >= 0)
    lossCount = ctx.lossCount;
  std::vector<at::Tensor> out;
  out.reserve(r.size());
  for (const stage::Tensor &t : r)
    out.push_back(stage::toATen(t));
  return out;
}

} // namespace varuna
