#include "meshtrain/plan/plan_keys.hpp"

#include <cmath>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <toml++/toml.h>

#include "meshtrain/core/enum_names.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::plan {
namespace {

enum class Type { Number, Integer, Text, Flag };

struct Key {
  const char* name;
  Type type;
  const char* meaning;
};

constexpr Key kKeys[] = {
    {"model.kind", Type::Text, "gpt, vit, or params (a bare parameter count)"},
    {"model.params", Type::Number, "kind params: parameter count (1.3e9)"},
    {"model.tokens_per_sample", Type::Number, "kind params: tokens per sample (1 for a plain vector)"},
    {"model.activation_mb_per_sample", Type::Number, "kind params: activation MB kept per sample (0: unknown)"},
    {"model.layers", Type::Integer, "transformer layers"},
    {"model.hidden", Type::Integer, "hidden size"},
    {"model.heads", Type::Integer, "attention heads (must divide hidden)"},
    {"model.seq_len", Type::Integer, "gpt: tokens per sequence"},
    {"model.vocab", Type::Integer, "gpt: vocabulary size"},
    {"model.image_size", Type::Integer, "vit: image side in pixels"},
    {"model.patch_size", Type::Integer, "vit: patch side in pixels"},
    {"model.channels", Type::Integer, "vit: image channels (3)"},
    {"model.classes", Type::Integer, "vit: classes"},
    {"model.experts", Type::Integer, "experts per MoE layer (1: dense)"},
    {"model.top_k", Type::Integer, "experts each token goes through"},
    {"model.sparse", Type::Flag, "a sparse model (large embeddings, sparse updates)"},
    {"model.flash_attention", Type::Flag,
     "attention keeps no (B, heads, s, s) probabilities (flash; meshtrain's default from s = 512)"},
    {"training.precision", Type::Text, "fp32, bf16 or fp16 (mixed, fp32 master weights)"},
    {"training.optimizer", Type::Text, "sgd, momentum (lars), adam (adamw, lamb)"},
    {"training.global_batch", Type::Integer, "samples per optimizer step"},
    {"training.micro_batch", Type::Integer, "samples per device per forward (0: the largest that fits)"},
    {"training.mfu", Type::Number, "share of peak FLOP/s a step reaches (0.4)"},
    {"training.overlap", Type::Number, "share of the gradient exchange hidden behind backward (0.8)"},
    {"training.base_lr", Type::Number, "learning rate tuned at training.reference_batch"},
    {"training.reference_batch", Type::Integer, "the batch base_lr was tuned at"},
    {"training.samples_per_epoch", Type::Number, "dataset size, for warmup in epochs"},
    {"hardware.device", Type::Text, "a device profile (meshtrain plan --list), or custom"},
    {"hardware.devices_per_node", Type::Integer, "devices in one node (the profile's node size)"},
    {"hardware.nodes", Type::Integer, "nodes (1)"},
    {"hardware.memory_gb", Type::Number, "device memory, GB"},
    {"hardware.tflops", Type::Number, "device peak dense TFLOP/s at training.precision"},
    {"hardware.usable_memory", Type::Number, "share of device memory training may use (0.9)"},
    {"hardware.intra_link", Type::Text, "link within a node (a profile name)"},
    {"hardware.inter_link", Type::Text, "network between nodes (a profile name)"},
    {"hardware.intra_gb_per_s", Type::Number, "within a node: GB/s per device and direction"},
    {"hardware.intra_latency_us", Type::Number, "within a node: small-message latency, us"},
    {"hardware.inter_gb_per_s", Type::Number, "between nodes: GB/s per node and direction"},
    {"hardware.inter_latency_us", Type::Number, "between nodes: small-message latency, us"},
    {"hardware.reducers", Type::Integer, "Reduction Server: reducer nodes (0: as many as the workers need)"},
    {"hardware.reducer_gb_per_s", Type::Number, "Reduction Server: each reducer's GB/s per direction (inter_link's)"},
    {"hardware.preemptible", Type::Flag, "workers may be preempted (Spot VMs)"},
    {"time.single_device_days", Type::Number, "days one device takes to train the model"},
    {"time.tokens", Type::Number, "token budget (samples x tokens per sample)"},
    {"time.target_days", Type::Number, "wanted time to train, days"},
};

// Optimizers the planner counts as another's state (training.optimizer).
constexpr EnumName<PlanOptimizer> kOptimizerAliases[] = {
    {PlanOptimizer::Adam, "adamw"}, {PlanOptimizer::Adam, "lamb"}, {PlanOptimizer::Momentum, "lars"}};

const Key* find_key(const std::string& name) {
  for (const Key& k : kKeys)
    if (name == k.name) return &k;
  return nullptr;
}

[[noreturn]] void fail(const PlanValue& v, const std::string& key, const std::string& what) {
  throw ConfigError(v.origin + ": " + key + ": " + what);
}

void put(PlanValues& values, const std::string& key, std::string text, const std::string& origin) {
  if (!find_key(key)) throw ConfigError(origin + ": " + key + ": unknown key (meshtrain plan --help lists them)");
  values[key] = {std::move(text), origin};
}

class Reader {
 public:
  explicit Reader(const PlanValues& values) : values_(values) {}
  bool has(const char* key) const { return values_.count(key) != 0; }

  double number(const char* key, double fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    const std::string& t = it->second.text;
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || !std::isfinite(v)) fail(it->second, key, "expected a number, got '" + t + "'");
    return v;
  }
  int64_t integer(const char* key, int64_t fallback) const {
    const double v = number(key, double(fallback));
    if (v != std::floor(v) || std::fabs(v) > 9e15) fail(values_.at(key), key, "expected a whole number");
    return int64_t(v);
  }
  std::string text(const char* key, const std::string& fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second.text;
  }
  // One of E's names, or one of `aliases` (names that count as another value).
  template <class E>
  E choice(const char* key, E fallback, const char* what, std::span<const EnumName<E>> aliases = {}) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    const std::string& t = it->second.text;
    if (const std::optional<E> v = parse_enum<E>(t)) return *v;
    for (const EnumName<E>& a : aliases)
      if (a.name == t) return a.value;
    fail(it->second, key, "unknown " + std::string(what) + " '" + t + "' (" + enum_choices<E>() + ")");
  }
  bool flag(const char* key) const {
    auto it = values_.find(key);
    if (it == values_.end()) return false;
    if (it->second.text == "true") return true;
    if (it->second.text == "false") return false;
    fail(it->second, key, "expected true or false, got '" + it->second.text + "'");
  }

 private:
  const PlanValues& values_;
};

}  // namespace

void read_plan_file(const std::string& path, PlanValues& values) {
  std::ifstream file(path);
  if (!file) throw ConfigError(path + ": cannot read the plan file");
  std::stringstream text;
  text << file.rdbuf();
  toml::table root;
  try {
    root = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(path + ":" + std::to_string(e.source().begin.line) + ": malformed TOML: " +
                      std::string(e.description()));
  }
  for (auto&& [section, node] : root) {
    const auto* table = node.as_table();
    if (!table) throw ConfigError(path + ": " + std::string(section.str()) + ": expected a [section] table");
    for (auto&& [key, value] : *table) {
      const std::string name = std::string(section.str()) + "." + std::string(key.str());
      std::string rendered;
      if (value.is_string())
        rendered = *value.value<std::string>();
      else if (value.is_boolean())
        rendered = *value.value<bool>() ? "true" : "false";
      else if (value.is_integer())
        rendered = std::to_string(*value.value<int64_t>());
      else if (value.is_floating_point()) {
        std::ostringstream os;
        os.precision(17);
        os << *value.value<double>();
        rendered = os.str();
      } else
        throw ConfigError(path + ": " + name + ": expected a number, text or true/false");
      put(values, name, rendered, path);
    }
  }
}

void read_plan_flags(const std::vector<std::string>& args, PlanValues& values) {
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos)
      throw ConfigError("unexpected argument '" + arg + "' (expected --section.key=value)");
    put(values, arg.substr(2, eq - 2), arg.substr(eq + 1), "command line");
  }
}

PlanInput plan_input_from(const PlanValues& values) {
  const Reader r(values);
  PlanInput in;
  ModelShape& m = in.model;
  const bool bare_count = r.has("model.params") && !r.has("model.layers");
  m.kind = r.choice("model.kind", bare_count ? ShapeKind::Params : ShapeKind::Gpt, "kind");
  m.params = r.number("model.params", 0);
  m.tokens_per_sample = r.number("model.tokens_per_sample", 1);
  m.activation_bytes_per_sample = r.number("model.activation_mb_per_sample", 0) * 1e6;
  m.layers = r.integer("model.layers", 0);
  m.hidden = r.integer("model.hidden", 0);
  m.heads = r.integer("model.heads", 0);
  m.seq_len = r.integer("model.seq_len", 0);
  m.vocab = r.integer("model.vocab", 0);
  m.image_size = r.integer("model.image_size", 0);
  m.patch_size = r.integer("model.patch_size", 0);
  m.channels = r.integer("model.channels", 3);
  m.classes = r.integer("model.classes", 0);
  m.experts = r.integer("model.experts", 1);
  m.top_k = r.integer("model.top_k", 1);
  in.sparse = r.flag("model.sparse");
  m.flash_attention = r.flag("model.flash_attention");

  in.precision = r.choice("training.precision", in.precision, "precision");
  in.optimizer = r.choice<PlanOptimizer>("training.optimizer", in.optimizer, "optimizer", kOptimizerAliases);
  in.global_batch = r.integer("training.global_batch", 0);
  in.micro_batch = r.integer("training.micro_batch", 0);
  in.mfu = r.number("training.mfu", in.mfu);
  in.overlap = r.number("training.overlap", in.overlap);
  in.base_lr = r.number("training.base_lr", 0);
  in.reference_batch = r.integer("training.reference_batch", 0);
  in.samples_per_epoch = r.number("training.samples_per_epoch", 0);

  Cluster& c = in.cluster;
  const std::string device = r.text("hardware.device", "custom");
  if (device == "custom") {
    if (!r.has("hardware.memory_gb") || !r.has("hardware.tflops"))
      throw ConfigError("hardware.device: give a device profile (meshtrain plan --list) or hardware.memory_gb and "
                        "hardware.tflops");
    c.device = {.name = "custom", .intra_link = "pcie4", .inter_link = "ethernet-100g", .devices_per_node = 1};
  } else {
    c.device = find_device(device);
  }
  c.device.memory_bytes = r.number("hardware.memory_gb", c.device.memory_bytes / 1e9) * 1e9;
  if (r.has("hardware.tflops"))
    c.device.peak_flops_16bit = c.device.peak_flops_fp32 = r.number("hardware.tflops", 0) * 1e12;
  c.devices_per_node = int(r.integer("hardware.devices_per_node", c.device.devices_per_node));
  c.nodes = int(r.integer("hardware.nodes", 1));
  in.usable_memory = r.number("hardware.usable_memory", in.usable_memory);
  c.intra = find_link(r.text("hardware.intra_link", c.device.intra_link));
  c.inter = find_link(r.text("hardware.inter_link", c.device.inter_link));
  c.intra.bandwidth_Bps = r.number("hardware.intra_gb_per_s", c.intra.bandwidth_Bps / 1e9) * 1e9;
  c.intra.latency_s = r.number("hardware.intra_latency_us", c.intra.latency_s * 1e6) * 1e-6;
  c.inter.bandwidth_Bps = r.number("hardware.inter_gb_per_s", c.inter.bandwidth_Bps / 1e9) * 1e9;
  c.inter.latency_s = r.number("hardware.inter_latency_us", c.inter.latency_s * 1e6) * 1e-6;
  auto name_given = [&](LinkProfile& link, const char* key, const char* bandwidth, const char* latency) {
    if (!r.has(bandwidth) && !r.has(latency)) return;
    char text[96];
    std::snprintf(text, sizeof text, "%s%.3g GB/s, %.3g us", r.has(key) ? (link.name + " at ").c_str() : "",
                  link.bandwidth_Bps / 1e9, link.latency_s * 1e6);
    link.name = text;
  };
  name_given(c.intra, "hardware.intra_link", "hardware.intra_gb_per_s", "hardware.intra_latency_us");
  name_given(c.inter, "hardware.inter_link", "hardware.inter_gb_per_s", "hardware.inter_latency_us");
  c.reducers = int(r.integer("hardware.reducers", 0));
  c.reducer_bandwidth_Bps = r.number("hardware.reducer_gb_per_s", 0) * 1e9;
  in.preemptible = r.flag("hardware.preemptible");

  in.single_device_days = r.number("time.single_device_days", 0);
  in.tokens = r.number("time.tokens", 0);
  in.target_days = r.number("time.target_days", 0);
  return in;
}

std::string plan_keys_reference() {
  std::string out;
  for (const Key& k : kKeys) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-34s %s\n", k.name, k.meaning);
    out += line;
  }
  return out;
}

}  // namespace meshtrain::plan
