#include "meshtrain/core/memory.hpp"

#include "meshtrain/core/device.hpp"

namespace meshtrain {

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Parameters: return "parameters";
    case MemoryKind::Gradients: return "gradients";
    case MemoryKind::OptimizerState: return "optimizer_state";
    case MemoryKind::Activations: return "activations";
    case MemoryKind::Communication: return "communication";
    case MemoryKind::Data: return "data";
    case MemoryKind::Other: return "other";
    case MemoryKind::WeightCopies: return "weight_copies";
  }
  return "unknown";
}

MemoryTracker& MemoryTracker::global() {
  static MemoryTracker tracker;
  return tracker;
}

MemoryTracker& MemoryTracker::device() {
  static MemoryTracker tracker;
  return tracker;
}

MemoryTracker& MemoryTracker::of(const Device& device) { return device.is_cpu() ? global() : MemoryTracker::device(); }

static void raise_peak(std::atomic<size_t>& peak, size_t value) {
  size_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

void MemoryTracker::add(MemoryKind kind, size_t bytes) {
  auto k = static_cast<size_t>(kind);
  raise_peak(peak_[k], current_[k].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(peak_total_, current_total_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryTracker::sub(MemoryKind kind, size_t bytes) {
  current_[static_cast<size_t>(kind)].fetch_sub(bytes, std::memory_order_relaxed);
  current_total_.fetch_sub(bytes, std::memory_order_relaxed);
}

size_t MemoryTracker::current(MemoryKind kind) const { return current_[static_cast<size_t>(kind)].load(); }
size_t MemoryTracker::peak(MemoryKind kind) const { return peak_[static_cast<size_t>(kind)].load(); }
size_t MemoryTracker::current_total() const { return current_total_.load(); }
size_t MemoryTracker::peak_total() const { return peak_total_.load(); }

void MemoryTracker::reset_peaks() {
  for (size_t k = 0; k < kMemoryKindCount; ++k) peak_[k].store(current_[k].load());
  peak_total_.store(current_total_.load());
}

}  // namespace meshtrain
