#pragma once
// PyTorch's TCPStore wire protocol, client side: the bytes of the requests a
// rendezvous needs. torchrun's agent hosts such a store and tells its workers
// so (TORCHELASTIC_USE_AGENT_STORE=True); torch_store_client.hpp speaks to it.
//
// A request is a query byte followed by its arguments; a string (key or
// value) is a little-endian uint64 length and its bytes, a number a
// little-endian int64:
//   SET   key value           no reply
//   GET   key                 reply: string (the key must exist: WAIT first)
//   WAIT  uint64 n, n keys    reply: one byte, 0 (stop waiting) once all are set
// Two generations number the queries differently. PyTorch 2.2 put VALIDATE in
// front (every later query moved up by one) and requires it, with a magic
// number, as a connection's first request; earlier stores (Debian's 1.13)
// know no VALIDATE. generation_probe() tells them apart (see its comment).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace meshtrain::comm::rendezvous::torch_store {

enum class Generation { Legacy, Current };  // before PyTorch 2.2 / since
enum class Query : uint8_t { Set, Get, Wait };

const char* generation_name(Generation g);
uint8_t query_byte(Generation g, Query q);

// The first request on a Current connection (VALIDATE + magic); "" for Legacy.
std::string encode_validate(Generation g);
std::string encode_set(Generation g, std::string_view key, std::string_view value);
std::string encode_get(Generation g, std::string_view key);
std::string encode_wait(Generation g, std::span<const std::string> keys);

inline constexpr uint8_t kStopWaiting = 0;
inline constexpr size_t kLengthBytes = 8;  // a string's length prefix, an int64
int64_t decode_int64(std::string_view eight_bytes);

// Bytes for a throwaway connection whose answer names the generation without
// harming either kind of store:
//   Current reads VALIDATE + magic, then four GETNUMKEYS, and answers with
//   four int64s (the connection stays open; the caller closes it).
//   Legacy reads SET (query 0) and then a key length made of the magic and the
//   next four bytes, 0x070707073C85F7CE (~5e17): allocating it fails at once,
//   and the store drops just this connection, which the prober sees as EOF
//   with nothing read. Nothing is ever allocated or stored.
std::string generation_probe();

}  // namespace meshtrain::comm::rendezvous::torch_store
