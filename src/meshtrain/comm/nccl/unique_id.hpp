#pragma once
// An NCCL communicator's unique id as text, so that it travels through
// meshtrain's rendezvous store (comm/rendezvous/key_value_store.hpp) under
// every launcher the store serves: rank 0 makes the id and publishes it,
// the others read it. No NCCL here: the id is 128 opaque bytes
// (NCCL_UNIQUE_ID_BYTES), and this file builds without NCCL.
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/comm/rendezvous/key_value_store.hpp"

namespace meshtrain::comm::nccl {

// Lower-case hexadecimal, two characters a byte.
std::string encode_unique_id(std::span<const unsigned char> bytes);
// The bytes of `text` (CommError naming `key` when it is not `size`
// bytes of hexadecimal: another job's or a truncated value).
std::vector<unsigned char> decode_unique_id(std::string_view text, size_t size, std::string_view key);

// Rank 0 publishes make_id()'s bytes under `key`; every rank returns them
// (the others wait for them, bounded by the store's timeout).
std::vector<unsigned char> share_unique_id(rendezvous::KeyValueStore& store, std::string_view key, int rank,
                                           size_t size, const std::function<std::vector<unsigned char>()>& make_id);

}  // namespace meshtrain::comm::nccl
