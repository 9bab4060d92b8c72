#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// TFRecord framing, and the "masked" form TFRecord stores: a CRC of data
// that itself holds CRCs is weak, so the stored value is rotated and offset.
// Check values: crc32c("123456789") = 0xE3069283; 32 zero bytes 0x8A9136AA.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace meshtrain::tensorboard {

// Continues a CRC: crc32c(crc32c(0, a), b) == the CRC of a followed by b.
// Runs the SSE4.2 crc32 instruction where the CPU has it (checked once at
// run time), else a slicing-by-8 table.
uint32_t crc32c(uint32_t crc, const void* data, size_t bytes);
inline uint32_t crc32c(std::string_view data) { return crc32c(0, data.data(), data.size()); }

// The table version alone, and whether crc32c() uses the instruction: for
// tests that check one against the other.
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t bytes);
bool crc32c_uses_sse42();

// TFRecord's stored form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t masked_crc32c(std::string_view data) { return mask_crc32c(crc32c(data)); }

}  // namespace meshtrain::tensorboard
