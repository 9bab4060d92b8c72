#include "meshtrain/comm/bench/bench_report.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "meshtrain/core/error.hpp"
#include "meshtrain/core/statistics.hpp"

namespace meshtrain::comm::bench {

void finish_all_reduce(BenchResult& result, std::vector<double> seconds_per_iter) {
  result.iters = int(seconds_per_iter.size());
  const double seconds = median(std::move(seconds_per_iter));
  result.time_us = seconds * 1e6;
  result.algbw_GBps = seconds > 0 ? double(result.bytes) / seconds / 1e9 : 0;
  const int n = result.nproc;
  result.busbw_GBps = n > 1 ? result.algbw_GBps * 2.0 * (n - 1) / n : 0;
}

std::string to_json(const BenchResult& r) {
  char numbers[256];
  std::snprintf(numbers, sizeof numbers,
                "\"nproc\":%d,\"bytes\":%zu,\"iters\":%d,\"time_us\":%.3f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f",
                r.nproc, r.bytes, r.iters, r.time_us, r.algbw_GBps, r.busbw_GBps);
  // Names are ours (no quotes or backslashes), so no escaping is needed.
  std::string out = "{\"collective\":\"" + r.collective + "\",\"algo\":\"" + r.algo + "\"";
  if (!r.chosen.empty()) out += ",\"chosen\":\"" + r.chosen + "\"";
  out += ",\"transport\":\"" + r.transport + "\"";
  if (r.reducers > 0) out += ",\"reducers\":" + std::to_string(r.reducers);
  return out + "," + numbers + "}";
}

size_t parse_bytes(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = text.substr(digits);
  size_t scale = 0;
  if (suffix.empty() || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "KiB") scale = size_t{1} << 10;
  else if (suffix == "M" || suffix == "MiB") scale = size_t{1} << 20;
  else if (suffix == "G" || suffix == "GiB") scale = size_t{1} << 30;
  if (digits == 0 || digits > 12 || scale == 0)
    throw ConfigError("size '" + text + "': expected a number with an optional K, M or G suffix (powers of 1024)");
  return std::stoull(text.substr(0, digits)) * scale;
}

std::vector<size_t> parse_size_range(const std::string& text) {
  const size_t colon = text.find(':');
  const size_t low = parse_bytes(text.substr(0, colon));
  const size_t high = colon == std::string::npos ? low : parse_bytes(text.substr(colon + 1));
  if (low == 0 || high < low)
    throw ConfigError("sizes '" + text + "': expected LOW:HIGH with 0 < LOW <= HIGH (e.g. 4K:256M)");
  std::vector<size_t> sizes;
  for (size_t s = low; s <= high; s *= 2) sizes.push_back(s);
  return sizes;
}

int timed_iterations(size_t bytes, int iters) {
  constexpr size_t kFull = size_t{8} << 20;
  if (bytes <= kFull) return iters;
  return std::max(3, int(double(iters) * double(kFull) / double(bytes) + 0.5));
}

int warmup_iterations(size_t bytes, int iters) {
  return std::clamp(timed_iterations(bytes, iters) / 4, 2, 5);
}

}  // namespace meshtrain::comm::bench
