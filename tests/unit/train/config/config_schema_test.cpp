#include "meshtrain/train/config/config_schema.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/core/error.hpp"

namespace meshtrain {
namespace {

// Runs f and returns the ConfigError message, failing the test if none is thrown.
template <class F>
std::string config_error(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return "";
}

TEST(ConfigSchema, ParsesSectionsOverDefaults) {
  JobConfig c = parse_job_config(R"(
[model]
n_layer = 2
n_embd = 64
n_head = 4
[optimizer]
lr = 1e-3
nesterov = true
[training]
steps = 7
)", "t.toml");
  EXPECT_EQ(c.model.n_layer, 2);
  EXPECT_EQ(c.model.n_embd, 64);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1e-3);
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_EQ(c.training.steps, 7);
  EXPECT_EQ(c.training.batch_size, 8);  // default kept
}

TEST(ConfigSchema, IntegerAcceptedForFloat) {
  JobConfig c = parse_job_config("[optimizer]\nlr = 1\n", "t.toml");
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1.0);
}

TEST(ConfigSchema, UnknownKeyNamesKeyAndFile) {
  auto msg = config_error([] { parse_job_config("[training]\nstepz = 3\n", "job.toml"); });
  EXPECT_NE(msg.find("job.toml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("training.stepz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key"), std::string::npos) << msg;
}

TEST(ConfigSchema, UnknownSection) {
  auto msg = config_error([] { parse_job_config("[trainng]\nsteps = 3\n", "job.toml"); });
  EXPECT_NE(msg.find("trainng"), std::string::npos) << msg;
}

TEST(ConfigSchema, WrongTypeNamesKey) {
  auto msg = config_error([] { parse_job_config("[training]\nsteps = \"ten\"\n", "job.toml"); });
  EXPECT_NE(msg.find("training.steps"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integer"), std::string::npos) << msg;
}

TEST(ConfigSchema, OutOfRangeNamesKeyAndRange) {
  auto msg = config_error([] { parse_job_config("[optimizer]\nlr = -0.1\n", "job.toml"); });
  EXPECT_NE(msg.find("optimizer.lr"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  msg = config_error([] { parse_job_config("[optimizer]\nbeta2 = 1.0\n", "job.toml"); });
  EXPECT_NE(msg.find("optimizer.beta2"), std::string::npos) << msg;
  msg = config_error([] { parse_job_config("[training]\nbatch_size = 0\n", "job.toml"); });
  EXPECT_NE(msg.find("training.batch_size"), std::string::npos) << msg;
}

TEST(ConfigSchema, UnknownChoiceListsAlternatives) {
  auto msg = config_error([] { parse_job_config("[model]\nkind = \"gpt5\"\n", "job.toml"); });
  EXPECT_NE(msg.find("model.kind"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpt, mlp, vit"), std::string::npos) << msg;
}

TEST(ConfigSchema, MalformedTomlGivesLine) {
  auto msg = config_error([] { parse_job_config("[model]\nn_layer = = 3\n", "bad.toml"); });
  EXPECT_NE(msg.find("bad.toml:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed TOML"), std::string::npos) << msg;
}

TEST(ConfigSchema, TokenDataNeedsATrainFileAndTextNeedsByteVocabulary) {
  const JobConfig c = parse_job_config(R"(
[model]
vocab_size = 50304
[data]
kind = "tokens"
train_path = "train.bin"
val_path = "val.bin"
tokenizer = "tokenizer.json"
order = "sequential"
)", "t.toml");
  EXPECT_EQ(c.data.kind, DataKind::Tokens);
  EXPECT_EQ(c.data.order, SampleOrder::Sequential);
  EXPECT_EQ(c.data.train_path, "train.bin");
  EXPECT_EQ(parse_job_config(job_config_to_toml(c), "back").data.tokenizer, "tokenizer.json");
  auto msg = config_error([] { parse_job_config("[data]\nkind = \"tokens\"\n", "job.toml"); });
  EXPECT_NE(msg.find("data.train_path"), std::string::npos) << msg;
  msg = config_error([] { parse_job_config("[model]\nvocab_size = 65\n", "job.toml"); });
  EXPECT_NE(msg.find("model.vocab_size: 65 is too small for data.kind = \"text\""), std::string::npos) << msg;
  // nanoGPT's shakespeare_char: 65 characters.
  EXPECT_EQ(parse_job_config("[model]\nvocab_size = 65\n[data]\nkind = \"tokens\"\ntrain_path = \"t.bin\"\n", "j")
                .model.vocab_size,
            65);
  msg = config_error([] { parse_job_config("[data]\norder = \"shuffled\"\n", "job.toml"); });
  EXPECT_NE(msg.find("random, sequential"), std::string::npos) << msg;
}

TEST(ConfigSchema, HeadsMustDivideWidth) {
  auto msg = config_error([] { parse_job_config("[model]\nn_embd = 100\nn_head = 3\n", "job.toml"); });
  EXPECT_NE(msg.find("model.n_head"), std::string::npos) << msg;
}

TEST(ConfigSchema, ModelAndDataKindsMustAgree) {
  auto msg = config_error([] { parse_job_config("[model]\nkind = \"mlp\"\n", "job.toml"); });
  EXPECT_NE(msg.find("data.kind"), std::string::npos) << msg;
}

TEST(ConfigSchema, MissingFileIsClear) {
  auto msg = config_error([] { load_job_config("/nonexistent/job.toml"); });
  EXPECT_NE(msg.find("/nonexistent/job.toml"), std::string::npos) << msg;
}

// The command line completes the file before the relations between keys
// are checked: `meshtrain run FILE --nproc 8 --parallel.tensor=2
// --parallel.pipeline=2` over a file of 2 workers.
TEST(ConfigSchema, FileAndOverridesAreValidatedTogether) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("meshtrain-config-schema-" + std::to_string(::getpid()) + ".toml")).string();
  std::ofstream(path) << "[model]\nkind = \"gpt\"\nn_layer = 2\nn_embd = 32\nn_head = 2\nblock_size = 16\n"
                         "[data]\nkind = \"text\"\npath = \"x.txt\"\n"
                         "[parallel]\ndata = \"allreduce\"\nworkers = 2\ntensor = 2\npipeline = 2\nmicro_batches = 2\n";
  const std::string alone = config_error([&] { load_job_config(path); });
  EXPECT_NE(alone.find("parallel.workers = 2 is not a multiple of pipeline 2 x tensor 2"), std::string::npos) << alone;
  const JobConfig c = load_job_config(path, {"--parallel.workers=8"});
  EXPECT_EQ(c.parallel.workers, 8);
  EXPECT_EQ(c.parallel.tensor, 2);
  const std::string six = config_error([&] { load_job_config(path, {"--parallel.workers=6"}); });
  EXPECT_NE(six.find("parallel.workers = 6 is not a multiple of pipeline 2 x tensor 2"), std::string::npos) << six;
  EXPECT_NE(config_error([&] { load_job_config(path, {"parallel.workers=8"}); }).find("unexpected argument"),
            std::string::npos);
  std::filesystem::remove(path);
}

TEST(ConfigSchema, OverridesTakeTomlValuesAndBareStrings) {
  JobConfig c;
  apply_override(c, "training.steps=100");
  apply_override(c, "optimizer.lr=0.01");
  apply_override(c, "data.path=some/file.txt");
  apply_override(c, "model.hidden=[64, 32]");
  apply_override(c, "optimizer.nesterov=true");
  apply_override(c, "schedule.decay=\"linear\"");
  EXPECT_EQ(c.training.steps, 100);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.01);
  EXPECT_EQ(c.data.path, "some/file.txt");
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{64, 32}));
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_EQ(c.schedule.decay, LrDecay::Linear);
}

TEST(ConfigSchema, BadOverridesAreErrors) {
  JobConfig c;
  EXPECT_NE(config_error([&] { apply_override(c, "training.steps=abc"); }).find("training.steps"),
            std::string::npos);
  EXPECT_NE(config_error([&] { apply_override(c, "training.nope=1"); }).find("unknown key"), std::string::npos);
  EXPECT_NE(config_error([&] { apply_override(c, "steps=1"); }).find("section.key"), std::string::npos);
  EXPECT_NE(config_error([&] { apply_override(c, "training.steps"); }).find("section.key=value"),
            std::string::npos);
  EXPECT_NE(config_error([&] { apply_override(c, "schedule.decay=exp"); }).find("cosine"), std::string::npos);
}

TEST(ConfigSchema, TomlRoundTripIsExact) {
  JobConfig c;
  apply_override(c, "optimizer.lr=0.00123456789");
  apply_override(c, "model.hidden=[7, 9, 11]");
  apply_override(c, "data.path=with \"quotes\" and \\ slash");
  JobConfig back = parse_job_config(job_config_to_toml(c), "roundtrip");
  EXPECT_EQ(job_config_to_toml(back), job_config_to_toml(c));
  EXPECT_EQ(back.optimizer.lr, c.optimizer.lr);
  EXPECT_EQ(back.model.hidden, c.model.hidden);
  EXPECT_EQ(back.data.path, c.data.path);
}

TEST(ConfigSchema, ReferenceListsEveryKey) {
  std::string ref = job_config_reference();
  EXPECT_NE(ref.find("--training.steps"), std::string::npos);
  EXPECT_NE(ref.find("--optimizer.lr"), std::string::npos);
  EXPECT_NE(ref.find("--parallel.data"), std::string::npos);
}

}  // namespace
}  // namespace meshtrain
