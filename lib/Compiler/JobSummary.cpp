//===- JobSummary.cpp - report.md and manifest.json -----------------------===//

#include "JobSummary.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include <set>

using namespace mlir;
using namespace varuna;

static std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return os.str();
}

JobSummary JobSummary::read(ModuleOp module, StringRef model) {
  JobSummary job;
  job.model = model.str();
  llvm::StringSet<> read = getReadParamNames(module);
  for (ParamOp p : module.getOps<ParamOp>()) {
    if (p.getFrozen()) {
      ++job.frozenParams;
      continue;
    }
    ++job.trainableParams;
    if (!read.contains(p.getSymName()))
      job.unreadParams.push_back(p.getSymName().str());
    job.trainableBytes += p.getTensorType().getSizeInBytes().constant;
  }
  if (auto graph = getTrainingGraph(module); succeeded(graph)) {
    func::FuncOp g = *graph;
    job.graph = g.getSymName().str();
    for (BlockArgument a : g.getArguments()) {
      Input in;
      if (auto n = g.getArgAttrOfType<StringAttr>(a.getArgNumber(), kNameAttr))
        in.name = n.getValue().str();
      auto t = a.getType().cast<VTensorType>();
      in.dtype = typeName(t.getElementType());
      for (SymInt d : t.getDims())
        in.shape.push_back(d.str());
      job.inputs.push_back(in);
    }
    for (unsigned i = 0; i < g.getNumResults(); ++i)
      if (g.getResultAttr(i, kLossAttr)) {
        auto n = g.getResultAttrOfType<StringAttr>(i, kNameAttr);
        job.loss = n ? n.getValue().str() : "result " + std::to_string(i);
      }
    if (auto rb = g->getAttrOfType<DenseI64ArrayAttr>("varuna.repeated_block"))
      job.repeatedBlock.assign(rb.asArrayRef().begin(), rb.asArrayRef().end());
    g.walk([&](CutPointOp c) {
      CutPoint cp;
      cp.index = c.getIndex();
      if (auto b = c->getAttrOfType<IntegerAttr>("bytes_per_example"))
        cp.bytesPerExample = b.getInt();
      cp.values = c.getValues().size();
      job.cutPoints.push_back(cp);
    });
  }
  if (auto sections = getSections(module); succeeded(sections))
    for (func::FuncOp s : *sections) {
      Section sec;
      sec.index = s->getAttrOfType<IntegerAttr>("varuna.section").getInt();
      sec.function = s.getSymName().str();
      for (StringRef p : getReadParams(s)) {
        sec.parameters.push_back(p.str());
        sec.gradientBytes.push_back(0);
        if (auto po = module.lookupSymbol<ParamOp>(p)) {
          int64_t bytes = po.getTensorType().getSizeInBytes().constant;
          sec.paramBytes += bytes;
          sec.largestParamBytes = std::max(sec.largestParamBytes, bytes);
          if (!po.getFrozen())
            sec.gradientBytes.back() = bytes;
        }
      }
      llvm::StringSet<> stats;
      s.walk([&](BatchNormOp bn) {
        for (Value v : {bn.getRunningMean(), bn.getRunningVar()})
          if (auto get = v ? v.getDefiningOp<GetParamOp>() : GetParamOp())
            if (stats.insert(get.getName()).second)
              if (auto po = module.lookupSymbol<ParamOp>(get.getName()))
                sec.runningStatsBytes +=
                    po.getTensorType().getSizeInBytes().constant;
      });
      if (auto c = s->getAttrOfType<CostAttr>("varuna.cost")) {
        sec.flops = c.getFlops();
        sec.backward = c.getBackward();
      }
      for (BlockArgument a : s.getArguments()) {
        if (s.getArgAttr(a.getArgNumber(), "varuna.recv"))
          ++sec.receives;
        if (auto n = s.getArgAttrOfType<StringAttr>(a.getArgNumber(), kNameAttr))
          sec.inputs.push_back(n.getValue().str());
      }
      for (unsigned i = 0; i < s.getNumResults(); ++i)
        if (s.getResultAttr(i, "varuna.send"))
          ++sec.sends;
      if (auto f = s->getAttrOfType<DenseI64ArrayAttr>("varuna.forwarded"))
        sec.forwarded.assign(f.asArrayRef().begin(), f.asArrayRef().end());
      if (auto d = s->getAttrOfType<IntegerAttr>("varuna.duplicated"))
        sec.duplicated = d.getInt();
      if (auto bd = s->getAttrOfType<IntegerAttr>("varuna.body"))
        sec.body = bd.getInt();
      job.sections.push_back(sec);
    }
  for (SharedParamOp t : module.getOps<SharedParamOp>()) {
    Tie tie{t.getParam().str(),
            std::vector<int64_t>(t.getSections().begin(),
                                 t.getSections().end())};
    if (auto po = module.lookupSymbol<ParamOp>(t.getParam()))
      tie.bytes = po.getTensorType().getSizeInBytes().constant;
    job.ties.push_back(tie);
  }
  for (GlobalReduceOp r : module.getOps<GlobalReduceOp>())
    job.reductions.push_back({r.getSymName().str(),
                              stringifyReductionKind(r.getKind()).str(),
                              r.getOver().str()});
  if (auto parts = module->getAttrOfType<ArrayAttr>("varuna.partitions"))
    for (Attribute a : parts) {
      auto d = a.cast<DictionaryAttr>();
      Partition p;
      p.stages = d.getAs<IntegerAttr>("stages").getInt();
      auto b = d.getAs<DenseI64ArrayAttr>("boundaries");
      p.boundaries.assign(b.asArrayRef().begin(), b.asArrayRef().end());
      auto m = d.getAs<DenseI64ArrayAttr>("memory");
      p.memory.assign(m.asArrayRef().begin(), m.asArrayRef().end());
      p.bottleneck = d.getAs<FloatAttr>("bottleneck").getValueAsDouble();
      p.imbalance = d.getAs<FloatAttr>("imbalance").getValueAsDouble();
      job.partitions.push_back(p);
    }
  return job;
}

std::string varuna::renderManifest(const JobSummary &job,
                                   const TrainingConfig &config) {
  using namespace llvm::json;
  auto ints = [](const std::vector<int64_t> &v) {
    Array a;
    for (int64_t x : v)
      a.push_back(x);
    return a;
  };
  auto strs = [](const std::vector<std::string> &v) {
    Array a;
    for (const auto &x : v)
      a.push_back(x);
    return a;
  };
  Array inputs, inputSpecs, cuts, sections, ties, reductions, partitions;
  for (const auto &in : job.inputs) {
    inputs.push_back(in.name);
    inputSpecs.push_back(Object{{"name", in.name},
                                {"shape", strs(in.shape)},
                                {"dtype", in.dtype}});
  }
  for (const auto &c : job.cutPoints)
    cuts.push_back(Object{{"index", c.index},
                          {"bytes_per_example", c.bytesPerExample},
                          {"values", c.values}});
  for (const auto &s : job.sections)
    sections.push_back(Object{
        {"index", s.index},
        {"function", s.function},
        {"parameters", strs(s.parameters)},
        {"param_bytes", s.paramBytes},
        {"largest_param_bytes", s.largestParamBytes},
        {"gradient_bytes", ints(s.gradientBytes)},
        {"running_stats_bytes", s.runningStatsBytes},
        {"flops_per_example", s.flops.perBatch},
        {"flops_fixed", s.flops.constant},
        {"backward_flops_per_example", s.backward.perBatch},
        {"graph_inputs", strs(s.inputs)},
        {"receives", s.receives},
        {"sends", s.sends},
        {"forwarded", ints(s.forwarded)},
        {"duplicated_ops", s.duplicated},
        {"body", s.body}});
  for (const auto &t : job.ties)
    ties.push_back(Object{{"parameter", t.parameter},
                          {"sections", ints(t.sections)},
                          {"bytes", t.bytes}});
  for (const auto &r : job.reductions)
    reductions.push_back(
        Object{{"name", r.name}, {"kind", r.kind}, {"over", r.over}});
  for (const auto &p : job.partitions)
    partitions.push_back(Object{{"stages", p.stages},
                                {"boundaries", ints(p.boundaries)},
                                {"bottleneck_flops_per_example", p.bottleneck},
                                {"imbalance", p.imbalance},
                                {"stage_memory_bytes", ints(p.memory)}});
  Object root{{"format", "varuna-job/1"},
              {"model", job.model},
              {"graph", job.graph},
              {"loss", job.loss},
              {"inputs", std::move(inputs)},
              {"input_specs", std::move(inputSpecs)},
              {"trainable_parameters", job.trainableParams},
              {"trainable_parameter_bytes", job.trainableBytes},
              {"unread_parameters", strs(job.unreadParams)},
              {"cut_points", std::move(cuts)},
              {"sections", std::move(sections)},
              {"ties", std::move(ties)},
              {"global_reductions", std::move(reductions)},
              {"partitions", std::move(partitions)},
              {"config", config.toJSON()}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return os.str();
}

static std::string bytesStr(double b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return llvm::formatv(u ? "{0:f1} {1}" : "{0:f0} {1}", b, units[u]).str();
}

static std::string joinInts(const std::vector<int64_t> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

std::string varuna::renderReport(const JobSummary &job,
                                 const TrainingConfig &config) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "# Varuna compile report: `" << job.model << "`\n\n";
  os << "Graph `@" << job.graph << "`: inputs";
  for (const auto &in : job.inputs) {
    os << " `" << in.name << "` [";
    for (size_t i = 0; i < in.shape.size(); ++i)
      os << (i ? ", " : "") << in.shape[i];
    os << "] " << in.dtype << ";";
  }
  os << " loss `" << job.loss << "`; " << job.trainableParams
     << " trainable parameters (" << bytesStr(job.trainableBytes) << ")";
  if (!job.unreadParams.empty())
    os << ", " << job.unreadParams.size()
       << " of them never read by the loss (kept as they are)";
  if (job.frozenParams)
    os << ", " << job.frozenParams << " frozen buffers";
  os << ". Training: " << stringifyOptimizer(config.optimizer.type) << ", "
     << stringifyPrecision(config.precision);
  if (config.clipGradNorm)
    os << ", clip by global norm " << *config.clipGradNorm;
  os << ".\n\n";
  if (job.repeatedBlock.size() == 3)
    os << "Repeated block: " << job.repeatedBlock[2] << " repetitions of "
       << job.repeatedBlock[1]
       << " compute ops; cuts follow the block boundaries.\n\n";

  double total = 0;
  for (const auto &s : job.sections)
    total += double(s.flops.perBatch + s.backward.perBatch);
  os << "## Cut-points (" << job.cutPoints.size() << ")\n\n";
  if (job.cutPoints.empty())
    os << "None: the graph is one section.\n\n";
  else {
    os << "| cut | between sections | crossing values | bytes per example |\n"
          "|---|---|---|---|\n";
    for (const auto &c : job.cutPoints)
      os << "| " << c.index << " | " << c.index - 1 << " -> " << c.index
         << " | " << c.values << " | " << c.bytesPerExample << " ("
         << bytesStr(c.bytesPerExample) << ") |\n";
    os << "\n";
  }

  os << "## Sections (" << job.sections.size() << ")\n\n"
     << "| section | compute share | forward FLOPs / example | parameters "
        "| parameter bytes | graph inputs read | receives | sends | "
        "forwarded | duplicated ops |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto &s : job.sections) {
    double share = total > 0 ? 100.0 * double(s.flops.perBatch +
                                              s.backward.perBatch) / total
                             : 0;
    std::string inputs;
    for (const auto &i : s.inputs)
      inputs += (inputs.empty() ? "" : ", ") + i;
    os << "| " << s.index << " | " << llvm::formatv("{0:f1}%", share)
       << " | " << s.flops.perBatch << " | " << s.parameters.size() << " | "
       << bytesStr(s.paramBytes) << " | " << (inputs.empty() ? "-" : inputs)
       << " | " << s.receives << " | " << s.sends << " | "
       << (s.forwarded.empty() ? "-" : joinInts(s.forwarded)) << " | "
       << s.duplicated << " |\n";
  }

  std::set<int64_t> bodies;
  for (const auto &s : job.sections)
    bodies.insert(s.body);
  os << "\n" << job.sections.size() << " sections, " << bodies.size()
     << " distinct bodies (sections equal up to parameter names share "
        "generated code).\n";

  os << "\n## Cross-partition decisions\n\n";
  if (job.ties.empty())
    os << "- Ties: none (no parameter is read by more than one section).\n";
  for (const auto &t : job.ties)
    os << "- Tie: `" << t.parameter << "` is read by sections "
       << joinInts(t.sections)
       << ": each stage holding one keeps a copy; gradients are summed across "
          "them every step and the copies stay identical.\n";
  for (const auto &s : job.sections) {
    if (!s.forwarded.empty())
      os << "- Section " << s.index << " forwards " << s.forwarded.size()
         << " received activation(s) unchanged to the next section "
            "(produced earlier, used later).\n";
  }
  for (const auto &s : job.sections)
    if (!s.inputs.empty() && s.index > 0)
      os << "- Section " << s.index << " re-reads graph input(s) "
         << [&] {
              std::string r;
              for (const auto &i : s.inputs)
                r += (r.empty() ? "`" : ", `") + i + "`";
              return r;
            }()
         << " and recomputes what derives from them (masks, positions, "
            "labels) instead of receiving it.\n";
  int64_t dup = 0;
  for (const auto &s : job.sections)
    dup += s.duplicated;
  os << "- Constants and weight-only computations are duplicated in the "
        "sections that use them ("
     << dup << " ops in all).\n";
  for (const auto &r : job.reductions)
    os << "- Global reduction `@" << r.name << "`: " << r.kind << " over "
       << r.over << " across all stages of a pipeline, every step.\n";

  os << "\n## Balance for every pipeline depth P\n\n"
     << "| P | stages (section ranges) | slowest stage share | imbalance "
        "(max / mean) | largest stage memory |\n|---|---|---|---|---|\n";
  for (const auto &p : job.partitions) {
    std::string ranges;
    for (size_t s = 0; s + 1 < p.boundaries.size(); ++s)
      ranges += (s ? " " : "") + std::string("[") +
                std::to_string(p.boundaries[s]) + "," +
                std::to_string(p.boundaries[s + 1]) + ")";
    int64_t mem = 0;
    for (int64_t m : p.memory)
      mem = std::max(mem, m);
    os << "| " << p.stages << " | " << ranges << " | "
       // max / total = (max / mean) / P, in the partition's own units
       // (FLOPs, or seconds from a --profile).
       << llvm::formatv("{0:f1}%", 100.0 * p.imbalance / double(p.stages))
       << " | " << llvm::formatv("{0:f3}", p.imbalance) << " | "
       << bytesStr(mem) << " |\n";
  }
  os << "\nStage memory counts parameters with their gradients and optimizer "
        "state, plus the stashed input of each in-flight micro-batch.\n";
  return os.str();
}
