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
//    "files": [{"name": "model.safetensors", "bytes": 1234, "crc32": "cbf43926"}, ...]}
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

struct Manifest {
  int64_t step = 0;
  std::vector<ManifestFile> files;  // sorted by name
};

// Fsyncs and digests every regular file in `dir` (dot-files excepted: they
// are leftovers of interrupted atomic writes), then writes the manifest
// atomically. A subdirectory is a CheckpointError: checkpoints are flat.
Manifest write_manifest(const std::filesystem::path& dir, int64_t step);

// Parses and validates `dir`/MANIFEST.json; CheckpointError if it is missing
// or malformed, naming the directory.
Manifest read_manifest(const std::filesystem::path& dir);

// Every listed file exists with its listed size (cheap: stat only).
void check_manifest_sizes(const std::filesystem::path& dir, const Manifest& manifest);
// Every listed file has its listed size and CRC-32 (reads all bytes).
void check_manifest_checksums(const std::filesystem::path& dir, const Manifest& manifest);

}  // namespace meshtrain::checkpoint
