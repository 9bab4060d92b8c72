// Hugging Face GPT-2 config.json: what export writes and what import accepts.
#include "meshtrain/train/interop/hf_gpt2.hpp"

#include <gtest/gtest.h>

#include "meshtrain/core/error.hpp"

namespace meshtrain::interop {
namespace {

ModelSection tiny() {
  ModelSection m;
  m.n_layer = 2;
  m.n_embd = 32;
  m.n_head = 2;
  m.block_size = 16;
  m.vocab_size = 256;
  return m;
}

std::string refusal(const nlohmann::json& config, const ModelSection& model) {
  try {
    check_hf_gpt2_config(config, model, "config.json");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(HfGpt2Config, ExportedConfigDescribesTheModelAndPassesItsOwnCheck) {
  const nlohmann::json c = hf_gpt2_config(tiny());
  EXPECT_EQ(c["model_type"], "gpt2");
  EXPECT_EQ(c["n_layer"], 2);
  EXPECT_EQ(c["n_positions"], 16);
  EXPECT_EQ(c["activation_function"], "gelu_new");
  EXPECT_EQ(c["tie_word_embeddings"], true);
  EXPECT_TRUE(c["bos_token_id"].is_null());  // bytes have no <|endoftext|>
  EXPECT_EQ(refusal(c, tiny()), "");
  ModelSection gpt2 = tiny();
  gpt2.vocab_size = 50257;
  EXPECT_EQ(hf_gpt2_config(gpt2)["eos_token_id"], 50256);
}

TEST(HfGpt2Config, EachMismatchNamesTheKeyAndBothValues) {
  nlohmann::json c = hf_gpt2_config(tiny());
  c["n_head"] = 4;
  EXPECT_EQ(refusal(c, tiny()), "config.json: n_head is 4, but the job's model has model.n_head = 2");
  c = hf_gpt2_config(tiny());
  c["activation_function"] = "relu";
  EXPECT_NE(refusal(c, tiny()).find("activation_function is \"relu\""), std::string::npos);
  c = hf_gpt2_config(tiny());
  c["n_positions"] = 8;  // shorter than the job's context: wpe cannot be cropped
  EXPECT_NE(refusal(c, tiny()).find("model.block_size = 16"), std::string::npos);
  c["n_positions"] = 1024;  // longer: the first 16 rows are taken
  EXPECT_EQ(refusal(c, tiny()), "");
  c["tie_word_embeddings"] = false;
  EXPECT_NE(refusal(c, tiny()).find("tie_word_embeddings"), std::string::npos);
}

TEST(HfGpt2Config, OnlyTheDenseGptMaps) {
  ModelSection moe = tiny();
  moe.n_expert = 4;
  EXPECT_THROW(hf_gpt2_config(moe), ConfigError);
  ModelSection vit = tiny();
  vit.kind = ModelKind::Vit;
  EXPECT_THROW(check_hf_gpt2_config(hf_gpt2_config(tiny()), vit, "config.json"), ConfigError);
}

}  // namespace
}  // namespace meshtrain::interop
