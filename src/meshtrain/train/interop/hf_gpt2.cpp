#include "meshtrain/train/interop/hf_gpt2.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <unordered_set>
#include <vector>

#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/checkpoint/param_io.hpp"
#include "meshtrain/checkpoint/safetensors_reader.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::interop {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "transformer.";
constexpr size_t kMaxListed = 8;

void require_dense_gpt(const ModelSection& model, const std::string& what) {
  if (model.kind != ModelKind::Gpt) throw ConfigError(what + ": only a GPT maps to Hugging Face GPT-2");
  if (model.n_expert > 1)
    throw ConfigError(what + ": GPT-2 has no mixture of experts (model.n_expert = " + std::to_string(model.n_expert) +
                      "); only a dense GPT maps to Hugging Face GPT-2");
}

// Buffers and tied copies a Hugging Face file may hold that are no parameter
// of ours: the causal-mask buffers of older transformers releases and the
// output layer, which is wte.
bool skipped_name(std::string_view name) {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

// nanoGPT's crop_block_size: a shorter context takes wpe's first rows.
bool cropped_wpe(const ParamView& v, const Shape& file_shape) {
  return v.name == "wpe.weight" && file_shape.size() == 2 && v.shape.size() == 2 && file_shape[1] == v.shape[1] &&
         file_shape[0] >= v.shape[0];
}

// A layout's views read from the tensors of one safetensors file by name
// (each view a prefix of its tensor's elements: the whole tensor, or wpe's
// first rows).
class HfGpt2Reader final : public checkpoint::FlatRangeReader {
 public:
  HfGpt2Reader(std::unique_ptr<checkpoint::SafetensorsReader> file, std::string prefix, const ParamStore& layout)
      : file_(std::move(file)), prefix_(std::move(prefix)), layout_(layout) {}

  bool has(std::string_view buffer) const override { return buffer == "params"; }

  void read(std::string_view buffer, size_t begin, size_t end, float* out) const override {
    if (buffer != "params")
      throw CheckpointError(file_->path().string() + ": a Hugging Face model holds parameters only, no '" +
                            std::string(buffer) + "'");
    if (end > begin) std::memset(out, 0, (end - begin) * sizeof(float));  // padding between views
    for (const ParamView& v : layout_.views()) {
      const size_t lo = std::max(begin, v.offset), hi = std::min(end, v.offset + v.numel);
      if (lo < hi) file_->read_elements(prefix_ + v.name, lo - v.offset, std::span<float>(out + (lo - begin), hi - lo));
    }
  }

 private:
  std::unique_ptr<checkpoint::SafetensorsReader> file_;
  std::string prefix_;
  const ParamStore& layout_;
};

// Every tensor of the layout in the file, by name and shape, and nothing
// else but skipped names; the first differences listed.
void check_tensors(const checkpoint::SafetensorsReader& file, const std::string& prefix, const ParamStore& layout) {
  std::vector<std::string> listed;
  size_t count = 0;
  auto note = [&](std::string text) {
    if (count++ < kMaxListed) listed.push_back(std::move(text));
  };
  std::unordered_set<std::string> expected;
  for (const ParamView& v : layout.views()) {
    const std::string name = prefix + v.name;
    expected.insert(name);
    const checkpoint::TensorInfo* t = file.find(name);
    if (!t)
      note("missing tensor '" + name + "' " + shape_string(v.shape));
    else if (!checkpoint::widens_to_float(t->dtype))
      note("tensor '" + name + "' is " + std::string(checkpoint::dtype_name(t->dtype)) + ", not a float");
    else if (t->shape != v.shape && !cropped_wpe(v, t->shape))
      note("tensor '" + name + "': the model has " + shape_string(v.shape) + ", the file has " +
           shape_string(t->shape));
  }
  for (const checkpoint::TensorInfo& t : file.tensors()) {
    const std::string_view bare = std::string_view(t.name).starts_with(prefix)
                                      ? std::string_view(t.name).substr(prefix.size())
                                      : std::string_view(t.name);
    if (!expected.count(t.name) && !skipped_name(bare))
      note("unexpected tensor '" + t.name + "' " + shape_string(t.shape) + " (not a GPT-2 parameter of this model)");
  }
  if (count == 0) return;
  std::string message = file.path().string() + " does not match the model (" + std::to_string(count) +
                        " difference" + (count > 1 ? "s" : "") + "):";
  for (const auto& d : listed) message += "\n  " + d;
  if (count > listed.size()) message += "\n  ... and " + std::to_string(count - listed.size()) + " more";
  throw CheckpointError(message);
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path.string() + ": cannot open");
  auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) throw CheckpointError(path.string() + ": not a JSON object");
  return json;
}

}  // namespace

nlohmann::json hf_gpt2_config(const ModelSection& model) {
  require_dense_gpt(model, "Hugging Face export");
  nlohmann::json config = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", model.vocab_size},
      {"n_positions", model.block_size},
      {"n_ctx", model.block_size},
      {"n_embd", model.n_embd},
      {"n_layer", model.n_layer},
      {"n_head", model.n_head},
      {"n_inner", nullptr},  // 4 n_embd
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"summary_first_dropout", 0.0},
      {"initializer_range", 0.02},
      {"scale_attn_weights", true},
      {"tie_word_embeddings", true},
      {"use_cache", true},
      {"torch_dtype", "float32"},
  };
  // GPT-2's <|endoftext|>; other vocabularies (bytes) have no such token.
  config["bos_token_id"] = config["eos_token_id"] = model.vocab_size == 50257 ? nlohmann::json(50256) : nullptr;
  return config;
}

void check_hf_gpt2_config(const nlohmann::json& config, const ModelSection& model, const std::string& source) {
  require_dense_gpt(model, source);
  auto fail = [&](const std::string& key, const nlohmann::json& value, const std::string& ours) {
    throw CheckpointError(source + ": " + key + " is " + value.dump() + ", but the job's model has " + ours);
  };
  if (config.contains("model_type") && config["model_type"] != "gpt2")
    fail("model_type", config["model_type"], "\"gpt2\"");
  const std::pair<const char*, int64_t> sizes[] = {{"n_layer", model.n_layer},
                                                   {"n_embd", model.n_embd},
                                                   {"n_head", model.n_head},
                                                   {"vocab_size", model.vocab_size}};
  for (const auto& [key, ours] : sizes) {
    if (!config.contains(key)) continue;
    if (!config[key].is_number_integer() || config[key].get<int64_t>() != ours)
      fail(key, config[key], "model." + std::string(key) + " = " + std::to_string(ours));
  }
  if (config.contains("n_positions") &&
      (!config["n_positions"].is_number_integer() || config["n_positions"].get<int64_t>() < model.block_size))
    fail("n_positions", config["n_positions"], "model.block_size = " + std::to_string(model.block_size));
  if (config.contains("n_inner") && !config["n_inner"].is_null() &&
      (!config["n_inner"].is_number_integer() || config["n_inner"].get<int64_t>() != 4 * model.n_embd))
    fail("n_inner", config["n_inner"], "an MLP of 4 n_embd = " + std::to_string(4 * model.n_embd));
  if (config.contains("activation_function") && config["activation_function"] != "gelu_new" &&
      config["activation_function"] != "gelu_pytorch_tanh")
    fail("activation_function", config["activation_function"], "the tanh GELU (\"gelu_new\")");
  if (config.contains("layer_norm_epsilon") &&
      (!config["layer_norm_epsilon"].is_number() ||
       std::abs(config["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12))
    fail("layer_norm_epsilon", config["layer_norm_epsilon"], "1e-5");
  if (config.contains("tie_word_embeddings") && config["tie_word_embeddings"] != true)
    fail("tie_word_embeddings", config["tie_word_embeddings"], "its output layer tied to wte");
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "add_cross_attention"})
    if (config.contains(key) && config[key] == true) fail(key, config[key], "false");
  if (config.contains("scale_attn_weights") && config["scale_attn_weights"] == false)
    fail("scale_attn_weights", config["scale_attn_weights"], "scores scaled by 1/sqrt(head size)");
}

void export_hf_gpt2(const ModelSection& model, const ParamStore& whole, const fs::path& out_dir,
                    checkpoint::Dtype dtype) {
  nlohmann::json config = hf_gpt2_config(model);
  if (dtype == checkpoint::Dtype::BF16) config["torch_dtype"] = "bfloat16";
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw IoError(out_dir.string() + ": cannot create: " + ec.message());
  const std::vector<checkpoint::TensorEntry> f32 = checkpoint::view_tensors(whole, whole.params().data(), kPrefix);
  std::vector<Bf16> storage;
  checkpoint::write_safetensors(out_dir / "model.safetensors",
                                dtype == checkpoint::Dtype::BF16 ? checkpoint::bf16_tensors(f32, storage) : f32,
                                {{"format", "pt"}});
  const std::string text = config.dump(2) + "\n";
  checkpoint::AtomicFile file(out_dir / "config.json");
  file.write(text.data(), text.size());
  file.commit();
}

std::optional<HfGpt2Source> find_hf_gpt2(const fs::path& path) {
  if (fs::is_regular_file(path) && path.extension() == ".safetensors") return HfGpt2Source{.weights = path, .config = std::nullopt};
  if (!fs::is_directory(path) || !fs::exists(path / "config.json")) return std::nullopt;
  if (!fs::exists(path / "model.safetensors")) {
    const bool pickle = fs::exists(path / "pytorch_model.bin");
    throw CheckpointError(path.string() + ": a Hugging Face model directory without model.safetensors" +
                          (pickle ? " (it holds pytorch_model.bin, a pickle meshtrain does not read: save it again "
                                    "with save_pretrained(..., safe_serialization=True))"
                                  : (fs::exists(path / "model.safetensors.index.json")
                                         ? " (its weights are split into several files, which meshtrain does not "
                                           "read yet)"
                                         : "")));
  }
  return HfGpt2Source{.weights = path / "model.safetensors", .config = path / "config.json"};
}

std::unique_ptr<checkpoint::FlatRangeReader> open_hf_gpt2(const HfGpt2Source& source, const ModelSection& model,
                                                          const ParamStore& whole) {
  if (source.config) check_hf_gpt2_config(read_json(*source.config), model, source.config->string());
  else require_dense_gpt(model, source.weights.string());
  auto file = std::make_unique<checkpoint::SafetensorsReader>(source.weights);
  const std::string prefix = file->find(std::string(kPrefix) + "wte.weight") ? kPrefix : "";
  check_tensors(*file, prefix, whole);
  return std::make_unique<HfGpt2Reader>(std::move(file), prefix, whole);
}

}  // namespace meshtrain::interop
