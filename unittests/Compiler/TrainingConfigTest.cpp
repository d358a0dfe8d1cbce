//===- TrainingConfigTest.cpp - The training-configuration parser ---------===//

#include "varuna/Compiler/TrainingConfig.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include <gtest/gtest.h>

using namespace varuna;

namespace {

/// Parses `text` as "train.json" and returns the error message; fails the
/// test if parsing succeeds.
std::string errorOf(llvm::StringRef text) {
  llvm::Expected<TrainingConfig> cfg = parseTrainingConfig(text, "train.json");
  if (cfg) {
    ADD_FAILURE() << "expected an error for: " << text.str();
    return "";
  }
  return llvm::toString(cfg.takeError());
}

TrainingConfig parseOK(llvm::StringRef text) {
  llvm::Expected<TrainingConfig> cfg = parseTrainingConfig(text, "train.json");
  if (!cfg) {
    ADD_FAILURE() << llvm::toString(cfg.takeError());
    return TrainingConfig();
  }
  return *cfg;
}

std::string print(const llvm::json::Value &v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << v;
  return os.str();
}

#define EXPECT_ERROR(text, msg) EXPECT_EQ(errorOf(text), msg)

//===----------------------------------------------------------------------===//
// Valid configurations
//===----------------------------------------------------------------------===//

TEST(TrainingConfig, EmptyObjectGivesDefaults) {
  TrainingConfig cfg = parseOK("{}");
  EXPECT_EQ(cfg.optimizer.type, OptimizerKind::SGD);
  EXPECT_EQ(cfg.optimizer.lr, 1e-3);
  EXPECT_EQ(cfg.optimizer.momentum, 0.0);
  EXPECT_EQ(cfg.optimizer.weightDecay, 0.0);
  EXPECT_EQ(cfg.optimizer.betas[0], 0.9);
  EXPECT_EQ(cfg.optimizer.betas[1], 0.999);
  EXPECT_EQ(cfg.optimizer.eps, 1e-8);
  EXPECT_FALSE(cfg.clipGradNorm);
  EXPECT_EQ(cfg.precision, Precision::FP32);
  EXPECT_EQ(cfg.lossScale.initial, 65536.0);
  EXPECT_EQ(cfg.lossScale.growthFactor, 2.0);
  EXPECT_EQ(cfg.lossScale.backoffFactor, 0.5);
  EXPECT_EQ(cfg.lossScale.growthInterval, 2000);
  EXPECT_FALSE(cfg.globalBatchSize);
  EXPECT_FALSE(cfg.microBatchSize);
  EXPECT_EQ(cfg, TrainingConfig());
  EXPECT_EQ(cfg.optimizer.stateCopies(), 0);
  EXPECT_FALSE(cfg.needsGlobalGradNorm());
  EXPECT_FALSE(cfg.needsOverflowCheck());
}

TEST(TrainingConfig, FullConfig) {
  TrainingConfig cfg = parseOK(R"({
    "optimizer": {"type": "adamw", "lr": 3e-4, "betas": [0.9, 0.95],
                  "eps": 1e-6, "weight_decay": 0.01},
    "clip_grad_norm": 1.0,
    "precision": "fp16",
    "loss_scale": {"initial": 1024, "growth_factor": 4.0,
                   "backoff_factor": 0.25, "growth_interval": 100},
    "global_batch_size": 512,
    "micro_batch_size": 4
  })");
  EXPECT_EQ(cfg.optimizer.type, OptimizerKind::AdamW);
  EXPECT_EQ(cfg.optimizer.lr, 3e-4);
  EXPECT_EQ(cfg.optimizer.betas[0], 0.9);
  EXPECT_EQ(cfg.optimizer.betas[1], 0.95);
  EXPECT_EQ(cfg.optimizer.eps, 1e-6);
  EXPECT_EQ(cfg.optimizer.weightDecay, 0.01);
  EXPECT_EQ(cfg.clipGradNorm, 1.0);
  EXPECT_EQ(cfg.precision, Precision::FP16);
  EXPECT_EQ(cfg.lossScale.initial, 1024.0);
  EXPECT_EQ(cfg.lossScale.growthFactor, 4.0);
  EXPECT_EQ(cfg.lossScale.backoffFactor, 0.25);
  EXPECT_EQ(cfg.lossScale.growthInterval, 100);
  EXPECT_EQ(cfg.globalBatchSize, 512);
  EXPECT_EQ(cfg.microBatchSize, 4);
  EXPECT_EQ(cfg.optimizer.stateCopies(), 2);
  EXPECT_TRUE(cfg.needsGlobalGradNorm());
  EXPECT_TRUE(cfg.needsOverflowCheck());
}

TEST(TrainingConfig, SGDWithMomentumAndLAMB) {
  TrainingConfig sgd =
      parseOK(R"({"optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9}})");
  EXPECT_EQ(sgd.optimizer.momentum, 0.9);
  EXPECT_EQ(sgd.optimizer.stateCopies(), 1);

  TrainingConfig lamb = parseOK(R"({"optimizer": {"type": "lamb"},
                                    "precision": "bf16"})");
  EXPECT_EQ(lamb.optimizer.stateCopies(), 2);
  EXPECT_TRUE(lamb.needsGlobalGradNorm()); // LAMB without clipping
  EXPECT_FALSE(lamb.needsOverflowCheck()); // bf16

  // Loss scaling is accepted with bf16; integral numbers written as floats
  // are integers.
  TrainingConfig bf16 = parseOK(
      R"({"precision": "bf16", "loss_scale": {"growth_interval": 10.0},
          "global_batch_size": 640.0, "micro_batch_size": 1e1})");
  EXPECT_EQ(bf16.lossScale.growthInterval, 10);
  EXPECT_TRUE(bf16.needsOverflowCheck()); // asked for
  std::string text;
  llvm::raw_string_ostream os(text);
  os << bf16.toJSON();
  EXPECT_EQ(parseOK(os.str()), bf16); // the request survives the round trip
  EXPECT_EQ(bf16.globalBatchSize, 640);
  EXPECT_EQ(bf16.microBatchSize, 10);
}

TEST(TrainingConfig, Stringify) {
  EXPECT_EQ(stringifyOptimizer(OptimizerKind::SGD), "sgd");
  EXPECT_EQ(stringifyOptimizer(OptimizerKind::AdamW), "adamw");
  EXPECT_EQ(stringifyOptimizer(OptimizerKind::LAMB), "lamb");
  EXPECT_EQ(stringifyPrecision(Precision::FP32), "fp32");
  EXPECT_EQ(stringifyPrecision(Precision::BF16), "bf16");
  EXPECT_EQ(stringifyPrecision(Precision::FP16), "fp16");
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(TrainingConfigErrors, InvalidJSON) {
  std::string msg = errorOf("{\n  \"optimizer\": {\n    \"lr\" 0.1}}");
  EXPECT_EQ(msg.rfind("train.json:3:", 0), 0u) << msg;
  EXPECT_NE(msg.find(": invalid JSON: "), std::string::npos) << msg;
  EXPECT_NE(errorOf("").find("train.json:1:"), std::string::npos);
  EXPECT_NE(errorOf("{} {}").find("invalid JSON"), std::string::npos);
}

TEST(TrainingConfigErrors, DuplicateKeys) {
  // llvm::json would silently keep one of the two.
  EXPECT_ERROR(R"({"precision": "fp16", "precision": "fp32"})",
               "train.json: precision: duplicate key");
  EXPECT_ERROR(R"({"optimizer": {"lr": 0.1, "type": "sgd", "lr": 0.2}})",
               "train.json: optimizer.lr: duplicate key");
  // Equal keys in different objects, and strings that look like keys, are
  // fine.
  parseOK(R"({"optimizer": {"type": "lamb", "betas": [0.5, 0.5]},
             "precision": "fp16", "loss_scale": {"initial": 2}})");
  parseOK(R"({"optimizer": {"type": "lamb"}, "precision": "bf16"})");
  EXPECT_ERROR(R"({"optimizer": {"type": "lr,{\"type\"", "lr": 1}})",
               "train.json: optimizer.type: expected one of \"sgd\", "
               "\"adamw\", \"lamb\", got \"lr,{\\\"type\\\"\"");
}

// A key written with an escape is the same key ("preci\u0073ion" was taken
// as another, and its value silently won).
TEST(TrainingConfigErrors, DuplicateKeysAreComparedDecoded) {
  EXPECT_ERROR(R"({"precision": "fp32", "preci\u0073ion": "bf16"})",
               "train.json: precision: duplicate key");
  EXPECT_ERROR(R"({"optimizer": {"lr": 0.5, "\u006cr": 0.001}})",
               "train.json: optimizer.lr: duplicate key");
}

// A control character in an unknown key is escaped (a NUL cut the
// message there).
TEST(TrainingConfigErrors, UnknownKeyWithControlCharacters) {
  std::string err = errorOf(R"({"precision\u0000x": "fp32"})");
  EXPECT_EQ(err.find('\0'), std::string::npos);
  EXPECT_NE(err.find("unknown key 'precision\\00x' (expected one of:"),
            std::string::npos)
      << err;
}

// llvm::json's parser recurses per level: 50000 nested arrays overflowed the
// stack (a segfault); refused before parsing.
TEST(TrainingConfigErrors, DeepNestingIsRefused) {
  std::string deep =
      "{\"optimizer\": " + std::string(50000, '[') + std::string(50000, ']') + "}";
  EXPECT_ERROR(deep, "train.json: invalid JSON: arrays and objects nest 50001 "
                     "deep, more than 64");
  // Brackets in strings do not count.
  EXPECT_ERROR("{\"optimizer\": {\"type\": \"" + std::string(100, '[') + "\"}}",
               "train.json: optimizer.type: expected one of \"sgd\", "
               "\"adamw\", \"lamb\", got \"" + std::string(100, '[') + "\"");
}

// Training computes in fp32: an lr of 1e39 passed here and failed in the
// first step in ATen's words, naming no field.
TEST(TrainingConfigErrors, NumbersPastFp32AreRefused) {
  EXPECT_ERROR(R"({"optimizer": {"lr": 1e39}})",
               "train.json: optimizer.lr: expected at most 3.4028235e38 (the "
               "largest fp32 number: training computes in fp32), got 1e+39");
  EXPECT_NE(errorOf(R"({"optimizer": {"lr": 0.1, "weight_decay": 1e39}})")
                .find("optimizer.weight_decay: expected at most 3.4028235e38"),
            std::string::npos);
  parseOK(R"({"optimizer": {"lr": 3e38}})");
}

TEST(TrainingConfigErrors, TopLevelNotAnObject) {
  EXPECT_ERROR("[1, 2]", "train.json: expected a JSON object at the top level, "
                         "got an array");
  EXPECT_ERROR("null", "train.json: expected a JSON object at the top level, "
                       "got null");
}

TEST(TrainingConfigErrors, UnknownKeys) {
  EXPECT_ERROR(R"({"optimiser": {}})",
               "train.json: unknown key 'optimiser' (expected one of: "
               "optimizer, lr_schedule, clip_grad_norm, precision, "
               "loss_scale, global_batch_size, micro_batch_size)");
  // The smallest unknown key is reported, whatever the hash order.
  EXPECT_NE(errorOf(R"({"zz": 1, "aa": 2})").find("unknown key 'aa'"),
            std::string::npos);
  EXPECT_ERROR(R"({"optimizer": {"beta": [0.9, 0.99]}})",
               "train.json: optimizer: unknown key 'beta' (expected one of: "
               "type, lr, momentum, weight_decay, betas, eps, "
               "no_weight_decay, no_weight_decay_1d)");
  EXPECT_ERROR(R"({"precision": "fp16", "loss_scale": {"initial": 1e-46}})",
               "train.json: loss_scale.initial: expected at least "
               "1.1754944e-38 (the smallest normal fp32 number: the scale is "
               "kept in fp32), got 1e-46");
  EXPECT_ERROR(R"({"precision": "fp16", "loss_scale": {"initial": 1e39}})",
               "train.json: loss_scale.initial: expected at most 3.4028235e38 "
               "(the largest fp32 number: training computes in fp32), got "
               "1e+39");
  EXPECT_ERROR(R"({"precision": "fp16", "loss_scale": {"init": 2}})",
               "train.json: loss_scale: unknown key 'init' (expected one of: "
               "initial, growth_factor, backoff_factor, growth_interval)");
}

TEST(TrainingConfigErrors, WrongTypes) {
  EXPECT_ERROR(R"({"optimizer": "adamw"})",
               "train.json: optimizer: expected an object, got \"adamw\"");
  EXPECT_ERROR(R"({"optimizer": {"type": "adam"}})",
               "train.json: optimizer.type: expected one of \"sgd\", "
               "\"adamw\", \"lamb\", got \"adam\"");
  EXPECT_ERROR(R"({"optimizer": {"type": 1}})",
               "train.json: optimizer.type: expected one of \"sgd\", "
               "\"adamw\", \"lamb\", got 1");
  EXPECT_ERROR(R"({"optimizer": {"lr": "0.1"}})",
               "train.json: optimizer.lr: expected a number > 0, got \"0.1\"");
  EXPECT_ERROR(R"({"precision": "FP16"})",
               "train.json: precision: expected one of \"fp32\", \"bf16\", "
               "\"fp16\", got \"FP16\"");
  EXPECT_ERROR(R"({"clip_grad_norm": null})",
               "train.json: clip_grad_norm: expected a number > 0, got null");
  EXPECT_ERROR(R"({"precision": "fp16", "loss_scale": true})",
               "train.json: loss_scale: expected an object, got true");
  EXPECT_ERROR(R"({"optimizer": {"type": "lamb", "betas": 0.9}})",
               "train.json: optimizer.betas: expected an array of 2 numbers "
               "in [0, 1), got 0.9");
  EXPECT_ERROR(R"({"optimizer": {"type": "lamb", "betas": [0.9]}})",
               "train.json: optimizer.betas: expected an array of 2 numbers "
               "in [0, 1), got an array of 1 elements");
  EXPECT_ERROR(R"({"optimizer": {"type": "lamb", "betas": [{}, 0.9]}})",
               "train.json: optimizer.betas[0]: expected a number in [0, 1), "
               "got an object");
}

TEST(TrainingConfigErrors, OutOfRange) {
  EXPECT_ERROR(R"({"optimizer": {"type": "adamw", "betas": [0.9, 1.5]}})",
               "train.json: optimizer.betas[1]: expected a number in [0, 1), "
               "got 1.5");
  EXPECT_ERROR(R"({"optimizer": {"lr": 0}})",
               "train.json: optimizer.lr: expected a number > 0, got 0");
  EXPECT_ERROR(R"({"optimizer": {"momentum": 1}})",
               "train.json: optimizer.momentum: expected a number in [0, 1), "
               "got 1");
  EXPECT_ERROR(R"({"optimizer": {"weight_decay": -0.1}})",
               "train.json: optimizer.weight_decay: expected a number >= 0, "
               "got -0.1");
  EXPECT_ERROR(R"({"optimizer": {"type": "adamw", "eps": 0}})",
               "train.json: optimizer.eps: expected a number > 0, got 0");
  EXPECT_ERROR(R"({"optimizer": {"lr": 1e400}})",
               "train.json: optimizer.lr: expected a number > 0, got inf");
  EXPECT_ERROR(R"({"clip_grad_norm": -1})",
               "train.json: clip_grad_norm: expected a number > 0, got -1");
  EXPECT_ERROR(R"({"precision": "fp16", "loss_scale": {"initial": 0}})",
               "train.json: loss_scale.initial: expected a number > 0, got 0");
  EXPECT_ERROR(R"({"precision": "fp16", "loss_scale": {"growth_factor": 1}})",
               "train.json: loss_scale.growth_factor: expected a number > 1, "
               "got 1");
  EXPECT_ERROR(R"({"precision": "fp16", "loss_scale": {"backoff_factor": 1}})",
               "train.json: loss_scale.backoff_factor: expected a number in "
               "(0, 1), got 1");
  EXPECT_ERROR(R"({"precision": "fp16",
                   "loss_scale": {"growth_interval": 0}})",
               "train.json: loss_scale.growth_interval: expected an integer "
               ">= 1, got 0");
  EXPECT_ERROR(R"({"global_batch_size": -8})",
               "train.json: global_batch_size: expected an integer >= 1, "
               "got -8");
}

TEST(TrainingConfigErrors, NonIntegralIntegers) {
  EXPECT_ERROR(R"({"global_batch_size": 512.5})",
               "train.json: global_batch_size: expected an integer >= 1, "
               "got 512.5");
  EXPECT_ERROR(R"({"micro_batch_size": 0.5})",
               "train.json: micro_batch_size: expected an integer >= 1, "
               "got 0.5");
  EXPECT_ERROR(R"({"precision": "bf16",
                   "loss_scale": {"growth_interval": 1e30}})",
               "train.json: loss_scale.growth_interval: expected an integer "
               ">= 1, got 1e+30");
  EXPECT_ERROR(R"({"micro_batch_size": "4"})",
               "train.json: micro_batch_size: expected an integer >= 1, "
               "got \"4\"");
}

TEST(TrainingConfigErrors, MicroBatchMustDivideGlobalBatch) {
  EXPECT_ERROR(R"({"global_batch_size": 512, "micro_batch_size": 3})",
               "train.json: micro_batch_size: expected a divisor of "
               "global_batch_size 512, got 3");
}

TEST(TrainingConfigErrors, KeysTheOptimizerDoesNotUse) {
  EXPECT_ERROR(R"({"optimizer": {"type": "adamw", "momentum": 0.9}})",
               "train.json: optimizer.momentum: not used by the adamw "
               "optimizer (only \"sgd\" takes momentum)");
  // The type decides, wherever it is written in the object.
  EXPECT_ERROR(R"({"optimizer": {"momentum": 0.9, "type": "lamb"}})",
               "train.json: optimizer.momentum: not used by the lamb "
               "optimizer (only \"sgd\" takes momentum)");
  EXPECT_ERROR(R"({"optimizer": {"type": "sgd", "betas": [0.9, 0.99]}})",
               "train.json: optimizer.betas: not used by the sgd optimizer "
               "(only \"adamw\" and \"lamb\" take betas)");
  EXPECT_ERROR(R"({"optimizer": {"betas": [0.9, 0.99]}})", // sgd by default
               "train.json: optimizer.betas: not used by the sgd optimizer "
               "(only \"adamw\" and \"lamb\" take betas)");
  EXPECT_ERROR(R"({"optimizer": {"eps": 1e-8}})",
               "train.json: optimizer.eps: not used by the sgd optimizer "
               "(only \"adamw\" and \"lamb\" take eps)");
}

TEST(TrainingConfigErrors, LossScaleNeedsReducedPrecision) {
  EXPECT_ERROR(R"({"loss_scale": {}})",
               "train.json: loss_scale: only meaningful with precision "
               "\"fp16\" or \"bf16\", but precision is \"fp32\"");
  EXPECT_ERROR(R"({"precision": "fp32", "loss_scale": {"initial": 8}})",
               "train.json: loss_scale: only meaningful with precision "
               "\"fp16\" or \"bf16\", but precision is \"fp32\"");
}

TEST(TrainingConfigErrors, SourceNameIsUsed) {
  llvm::Expected<TrainingConfig> cfg =
      parseTrainingConfig(R"({"precision": 16})", "configs/run.json");
  ASSERT_FALSE(cfg);
  EXPECT_EQ(llvm::toString(cfg.takeError()),
            "configs/run.json: precision: expected one of \"fp32\", "
            "\"bf16\", \"fp16\", got 16");
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

TEST(TrainingConfigFiles, MissingFile) {
  llvm::Expected<TrainingConfig> cfg =
      loadTrainingConfig("/nonexistent-dir/train.json");
  ASSERT_FALSE(cfg);
  std::string msg = llvm::toString(cfg.takeError());
  EXPECT_NE(msg.find("/nonexistent-dir/train.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
}

TEST(TrainingConfigFiles, LoadsAndNamesTheFile) {
  llvm::SmallString<128> path;
  int fd;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("train", "json", fd, path));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << R"({"optimizer": {"type": "lamb"}, "micro_batch_size": 2.5})";
  }
  llvm::Expected<TrainingConfig> cfg = loadTrainingConfig(path);
  ASSERT_FALSE(cfg);
  EXPECT_EQ(
      llvm::toString(cfg.takeError()),
      (path + ": micro_batch_size: expected an integer >= 1, got 2.5").str());

  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << R"({"optimizer": {"type": "lamb"}, "micro_batch_size": 2})";
  }
  llvm::Expected<TrainingConfig> ok = loadTrainingConfig(path);
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  EXPECT_EQ(ok->optimizer.type, OptimizerKind::LAMB);
  EXPECT_EQ(ok->microBatchSize, 2);
  llvm::sys::fs::remove(path);
}

//===----------------------------------------------------------------------===//
// toJSON and round trips
//===----------------------------------------------------------------------===//

void expectRoundTrip(const TrainingConfig &cfg) {
  std::string text = print(cfg.toJSON());
  llvm::Expected<TrainingConfig> back = parseTrainingConfig(text, "rt.json");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError()) << "\n" << text;
  EXPECT_EQ(*back, cfg) << text;
  // And the printed form is a fixed point.
  EXPECT_EQ(print(back->toJSON()), text);
}

TEST(TrainingConfigJSON, DefaultsAreFilledIn) {
  EXPECT_EQ(print(TrainingConfig().toJSON()),
            R"({"optimizer":{"lr":0.001,"momentum":0,"type":"sgd",)"
            R"("weight_decay":0},"precision":"fp32"})");

  TrainingConfig adam = parseOK(R"({"optimizer": {"type": "adamw"},
                                    "precision": "fp16"})");
  llvm::json::Value v = adam.toJSON();
  const llvm::json::Object *o = v.getAsObject();
  ASSERT_TRUE(o);
  const llvm::json::Object *opt = o->getObject("optimizer");
  ASSERT_TRUE(opt);
  EXPECT_EQ(opt->getString("type"), "adamw");
  EXPECT_EQ(opt->getNumber("lr"), 1e-3);
  EXPECT_EQ(opt->getNumber("eps"), 1e-8);
  // As torch.optim.AdamW; SGD and LAMB keep 0, and a given value wins.
  EXPECT_EQ(opt->getNumber("weight_decay"), 0.01);
  EXPECT_EQ(parseOK(R"({"optimizer": {"type": "lamb"}})").optimizer.weightDecay,
            0.0);
  EXPECT_EQ(parseOK(R"({"optimizer": {"type": "adamw", "weight_decay": 0}})")
                .optimizer.weightDecay,
            0.0);
  EXPECT_FALSE(opt->get("momentum"));
  const llvm::json::Array *betas = opt->getArray("betas");
  ASSERT_TRUE(betas);
  ASSERT_EQ(betas->size(), 2u);
  EXPECT_EQ((*betas)[0].getAsNumber(), 0.9);
  EXPECT_EQ((*betas)[1].getAsNumber(), 0.999);
  EXPECT_EQ(o->getString("precision"), "fp16");
  const llvm::json::Object *ls = o->getObject("loss_scale");
  ASSERT_TRUE(ls);
  EXPECT_EQ(ls->getNumber("initial"), 65536.0);
  EXPECT_EQ(ls->getNumber("growth_factor"), 2.0);
  EXPECT_EQ(ls->getNumber("backoff_factor"), 0.5);
  EXPECT_EQ(ls->getInteger("growth_interval"), 2000);
  EXPECT_FALSE(o->get("clip_grad_norm"));
  EXPECT_FALSE(o->get("global_batch_size"));
  EXPECT_FALSE(o->get("micro_batch_size"));
}

TEST(TrainingConfigJSON, RoundTrip) {
  expectRoundTrip(TrainingConfig());

  TrainingConfig full;
  full.optimizer.type = OptimizerKind::AdamW;
  full.optimizer.lr = 3e-4;
  full.optimizer.betas = {0.9, 0.95};
  full.optimizer.eps = 1e-6;
  full.optimizer.weightDecay = 0.1;
  full.clipGradNorm = 0.7;
  full.precision = Precision::FP16;
  full.lossScale = {1.0 / 3.0, 1.5, 0.1, 7};
  full.globalBatchSize = 1024;
  full.microBatchSize = 8;
  expectRoundTrip(full);
  full.optimizer.noWeightDecay = {"bias", "norm"};
  full.optimizer.noWeightDecay1d = true;
  expectRoundTrip(full);

  TrainingConfig sgd;
  sgd.optimizer.momentum = 0.9;
  sgd.optimizer.lr = 0.1;
  sgd.globalBatchSize = 3;
  expectRoundTrip(sgd);

  TrainingConfig lamb;
  lamb.optimizer.type = OptimizerKind::LAMB;
  lamb.precision = Precision::BF16;
  lamb.microBatchSize = 5;
  expectRoundTrip(lamb);

  TrainingConfig scheduled;
  scheduled.lrSchedule.warmupSteps = 100;
  scheduled.lrSchedule.decay = LRSchedule::Decay::Cosine;
  scheduled.lrSchedule.decaySteps = 900;
  scheduled.lrSchedule.minLr = 1e-5;
  expectRoundTrip(scheduled);
  TrainingConfig warmOnly;
  warmOnly.lrSchedule.warmupSteps = 7;
  expectRoundTrip(warmOnly);

  // And from text.
  expectRoundTrip(parseOK(R"({
    "optimizer": {"type": "adamw", "lr": 3e-4, "betas": [0.9, 0.999],
                  "eps": 1e-8, "weight_decay": 0.01},
    "clip_grad_norm": 1.0, "precision": "bf16",
    "loss_scale": {"initial": 65536, "growth_factor": 2.0,
                   "backoff_factor": 0.5, "growth_interval": 2000},
    "global_batch_size": 512, "micro_batch_size": 4})"));
}

} // namespace

// no_weight_decay / no_weight_decay_1d: which parameters keep the decay.
TEST(TrainingConfig, NoWeightDecay) {
  TrainingConfig c = parseOK(R"({"optimizer": {"type": "adamw",
      "weight_decay": 0.1, "no_weight_decay": ["bias", "ln_"]}})");
  EXPECT_EQ(c.optimizer.weightDecayFor("h.0.attn.c_attn.weight", 2), 0.1);
  EXPECT_EQ(c.optimizer.weightDecayFor("h.0.attn.c_attn.bias", 1), 0.0);
  EXPECT_EQ(c.optimizer.weightDecayFor("h.0.ln_1.weight", 1), 0.0);
  // 1-D parameters keep the decay unless no_weight_decay_1d says otherwise.
  EXPECT_EQ(c.optimizer.weightDecayFor("scale", 1), 0.1);
  EXPECT_EQ(unmatchedNoWeightDecay(c.optimizer, {"a.bias", "b.weight"}),
            std::vector<std::string>{"ln_"});
  TrainingConfig d = parseOK(R"({"optimizer": {"type": "sgd",
      "weight_decay": 0.1, "no_weight_decay_1d": true}})");
  EXPECT_EQ(d.optimizer.weightDecayFor("scale", 1), 0.0);
  EXPECT_EQ(d.optimizer.weightDecayFor("temperature", 0), 0.0);
  EXPECT_EQ(d.optimizer.weightDecayFor("proj.bias", 2), 0.1);
  EXPECT_NE(c, d);
}

// lr_schedule: parsed, and the lr of each step (worked by hand: lr 1e-3,
// warm-up 4, then 4 decay steps to 2e-4).
TEST(TrainingConfig, LRSchedule) {
  TrainingConfig c = parseOK(R"({"optimizer": {"lr": 0.001},
    "lr_schedule": {"warmup_steps": 4, "decay": "linear", "decay_steps": 4,
                    "min_lr": 0.0002}})");
  const LRSchedule &s = c.lrSchedule;
  EXPECT_TRUE(s.active());
  EXPECT_EQ(s.warmupSteps, 4);
  EXPECT_EQ(s.decay, LRSchedule::Decay::Linear);
  double want[] = {2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 8e-4, 6e-4, 4e-4, 2e-4,
                   2e-4};
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(s.lrAt(i, 1e-3), want[i], 1e-15) << "step " << i;
  LRSchedule cosine;
  cosine.decay = LRSchedule::Decay::Cosine;
  cosine.decaySteps = 2;
  EXPECT_DOUBLE_EQ(cosine.lrAt(0, 1.0), 1.0);
  EXPECT_NEAR(cosine.lrAt(1, 1.0), 0.5, 1e-15); // (1 + cos(pi / 2)) / 2
  EXPECT_NEAR(cosine.lrAt(2, 1.0), 0.0, 1e-15);
  EXPECT_NEAR(cosine.lrAt(50, 1.0), 0.0, 1e-15); // held, not periodic
  EXPECT_FALSE(LRSchedule().active());
  EXPECT_DOUBLE_EQ(LRSchedule().lrAt(5, 0.1), 0.1);
}

TEST(TrainingConfigErrors, LRSchedule) {
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"warmup_steps": -1}})"),
            "train.json: lr_schedule.warmup_steps: expected an integer >= 0, "
            "got -1");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"decay": "exp"}})"),
            "train.json: lr_schedule.decay: expected one of \"none\", "
            "\"linear\", \"cosine\", got \"exp\"");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"decay_steps": 5}})"),
            "train.json: lr_schedule.decay_steps: only meaningful with "
            "\"decay\": \"linear\" or \"cosine\"");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"decay": "linear"}})"),
            "train.json: lr_schedule.decay_steps: missing: how many steps the "
            "decay takes");
  EXPECT_EQ(errorOf(R"({"optimizer": {"lr": 0.5}, "lr_schedule":
                        {"decay": "cosine", "decay_steps": 3, "min_lr": 1}})"),
            "train.json: lr_schedule.min_lr: expected a number in [0, "
            "optimizer.lr = 0.5], got 1");
}
