#pragma once
// The manifest is a checkpoint's commit marker and its integrity record:
// MANIFEST.json lists every file with its size and CRC-32. It is written
// last, after every file is fsynced, so its presence means the files were
// durable; the sizes let a listing reject a truncated copy cheaply, and the
// CRCs let a load detect bit rot or a partial copy that kept sizes (a bare
// COMPLETE marker would catch neither). CRC-32 rather than a cryptographic
// hash: it guards against accidents, not attackers, runs at GB/s, and any
// zlib can recompute it (see crc32.hpp).
//
//   {"format": "meshtrain-checkpoint", "version": 1, "step": 100,
//    "job": {"workers": 4, "zero_stage": 3, "mesh": {"dp": 4, "tp": 1, "pp": 1, "ep": 1},
//            "config": "<the job config as TOML>"},
//    "files": [{"name": "shard-00000-of-00004.safetensors", "bytes": 1234, "crc32": "cbf43926"}, ...]}
//
// "job" tells a reader what wrote the checkpoint (and is optional: older
// checkpoints lack it); the files list is the shard list.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain::checkpoint {

inline constexpr std::string_view kManifestName = "MANIFEST.json";

struct ManifestFile {
  std::string name;  // a plain file name inside the checkpoint directory
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// What wrote a checkpoint: how many workers, the ZeRO stage, the device
// mesh (data x tensor x pipeline x expert parallel sizes), and the config.
struct ManifestJob {
  int workers = 1;
  int zero_stage = 0;
  int dp = 1, tp = 1, pp = 1, ep = 1;
  std::string config;  // TOML
};

struct Manifest {
  int64_t step = 0;
  ManifestJob job;
  std::vector<ManifestFile> files;  // sorted by name
};

// Fsyncs and digests every regular file in `dir` (dot-files excepted: they
// are leftovers of interrupted atomic writes), then writes the manifest
// atomically. A subdirectory is a CheckpointError: checkpoints are flat.
Manifest write_manifest(const std::filesystem::path& dir, int64_t step, const ManifestJob& job = {});

// Parses and validates `dir`/MANIFEST.json; CheckpointError if it is missing
// or malformed, naming the directory.
Manifest read_manifest(const std::filesystem::path& dir);

// Every listed file exists with its listed size (cheap: stat only).
void check_manifest_sizes(const std::filesystem::path& dir, const Manifest& manifest);
// Every listed file has its listed size and CRC-32 (reads all bytes).
void check_manifest_checksums(const std::filesystem::path& dir, const Manifest& manifest);

}  // namespace meshtrain::checkpoint
