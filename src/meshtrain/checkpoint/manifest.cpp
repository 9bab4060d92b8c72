#include "meshtrain/checkpoint/manifest.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <system_error>

#include "meshtrain/checkpoint/crc32.hpp"
#include "meshtrain/checkpoint/durable_io.hpp"
#include "meshtrain/core/error.hpp"

namespace meshtrain::checkpoint {

namespace {

using json = nlohmann::json;
constexpr std::string_view kFormat = "meshtrain-checkpoint";
constexpr int kVersion = 1;

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

bool parse_hex32(const std::string& s, uint32_t& out) {
  if (s.size() != 8) return false;
  out = 0;
  for (char c : s) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    out = out << 4 | static_cast<uint32_t>(d);
  }
  return true;
}

// A name that stays inside the directory: no separators, not "." or "..".
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name != kManifestName;
}

}  // namespace

Manifest write_manifest(const std::filesystem::path& dir, int64_t step, const ManifestJob& job) {
  Manifest manifest;
  manifest.step = step;
  manifest.job = job;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with('.') || name == kManifestName) continue;
    if (!it->is_regular_file())
      throw CheckpointError("checkpoint " + dir.string() + ": '" + name +
                            "' is not a regular file; checkpoint directories are flat");
    fsync_file(it->path());
    FileDigest d = digest_file(it->path());
    manifest.files.push_back({name, d.bytes, d.crc32});
  }
  if (ec) throw IoError("list checkpoint directory " + dir.string() + ": " + ec.message());
  std::sort(manifest.files.begin(), manifest.files.end(),
            [](const ManifestFile& a, const ManifestFile& b) { return a.name < b.name; });

  json files = json::array();
  for (const auto& f : manifest.files) files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"crc32", hex32(f.crc32)}});
  json job_doc = {{"workers", job.workers},
                  {"zero_stage", job.zero_stage},
                  {"mesh", {{"dp", job.dp}, {"tp", job.tp}, {"pp", job.pp}, {"ep", job.ep}}},
                  {"config", job.config}};
  json doc = {{"format", kFormat}, {"version", kVersion}, {"step", step}, {"job", std::move(job_doc)},
              {"files", std::move(files)}};
  const std::string text = doc.dump(1) + "\n";
  AtomicFile out(dir / kManifestName);
  out.write(text.data(), text.size());
  out.commit();  // also fsyncs `dir`, so every file name in it is durable too
  return manifest;
}

Manifest read_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kManifestName;
  auto bad = [&](const std::string& problem) {
    return CheckpointError("checkpoint " + dir.string() + ": " + std::string(kManifestName) + " " + problem);
  };
  std::string text;
  try {
    Fd fd = Fd::open_read(path);
    const uint64_t size = fd.size();
    if (size > (64u << 20)) throw bad("is implausibly large (" + std::to_string(size) + " bytes)");
    text.resize(size);
    if (!fd.pread_exact(text.data(), text.size(), 0)) throw bad("shrank while being read");
  } catch (const IoError& e) {
    throw bad(std::string("cannot be read: ") + e.what());
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw bad("is not valid JSON");
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != std::string(kFormat)) throw bad("has no \"format\": \"meshtrain-checkpoint\"");
  if (!doc.contains("version") || doc["version"] != kVersion) throw bad("has an unsupported version");
  if (!doc.contains("step") || !doc["step"].is_number_integer()) throw bad("has no integer step");
  if (!doc.contains("files") || !doc["files"].is_array()) throw bad("has no files array");

  Manifest manifest;
  manifest.step = doc["step"].get<int64_t>();
  if (doc.contains("job")) {
    const json& j = doc["job"];
    auto count = [&](const json& obj, const char* key, int& out) {
      if (!obj.is_object() || !obj.contains(key)) return;
      if (!obj[key].is_number_integer()) throw bad(std::string("has a malformed job.") + key);
      out = obj[key].get<int>();
    };
    count(j, "workers", manifest.job.workers);
    count(j, "zero_stage", manifest.job.zero_stage);
    if (j.is_object() && j.contains("mesh")) {
      count(j["mesh"], "dp", manifest.job.dp);
      count(j["mesh"], "tp", manifest.job.tp);
      count(j["mesh"], "pp", manifest.job.pp);
      count(j["mesh"], "ep", manifest.job.ep);
    }
    if (j.is_object() && j.contains("config") && j["config"].is_string()) manifest.job.config = j["config"].get<std::string>();
  }
  for (const json& f : doc["files"]) {
    ManifestFile file;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("bytes") ||
        !f["bytes"].is_number_unsigned() || !f.contains("crc32") || !f["crc32"].is_string())
      throw bad("has a malformed file entry " + f.dump());
    file.name = f["name"].get<std::string>();
    file.bytes = f["bytes"].get<uint64_t>();
    if (!plain_name(file.name)) throw bad("lists an invalid file name '" + file.name + "'");
    if (!parse_hex32(f["crc32"].get<std::string>(), file.crc32)) throw bad("has a malformed crc32 for " + file.name);
    manifest.files.push_back(std::move(file));
  }
  return manifest;
}

void check_manifest_sizes(const std::filesystem::path& dir, const Manifest& manifest) {
  for (const auto& f : manifest.files) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(dir / f.name, ec);
    if (ec) throw CheckpointError("checkpoint " + dir.string() + ": file " + f.name + " is missing (" + ec.message() + ")");
    if (size != f.bytes)
      throw CheckpointError("checkpoint " + dir.string() + ": file " + f.name + " has " + std::to_string(size) +
                            " bytes, the manifest says " + std::to_string(f.bytes));
  }
}

void check_manifest_checksums(const std::filesystem::path& dir, const Manifest& manifest) {
  check_manifest_sizes(dir, manifest);
  for (const auto& f : manifest.files) {
    FileDigest d = digest_file(dir / f.name);
    if (d.bytes != f.bytes || d.crc32 != f.crc32)
      throw CheckpointError("checkpoint " + dir.string() + ": file " + f.name + " is corrupt: crc32 " +
                            hex32(d.crc32) + " over " + std::to_string(d.bytes) + " bytes, the manifest says " +
                            hex32(f.crc32) + " over " + std::to_string(f.bytes));
  }
}

}  // namespace meshtrain::checkpoint
