#pragma once
// Memory accounting by kind. Every large buffer is an AlignedBuffer, which
// reports its bytes here, so a run can print current and peak bytes per kind
// (the ZeRO formulas are checked against these numbers).
#include <array>
#include <atomic>
#include <cstddef>
#include <string_view>

namespace meshtrain {

struct Device;

// WeightCopies: the bf16 copies of the weight matrices that bf16 products
// read (training.precision = "bf16"), made in forward, kept for backward.
enum class MemoryKind { Parameters, Gradients, OptimizerState, Activations, Communication, Data, Other, WeightCopies };
inline constexpr size_t kMemoryKindCount = 8;

std::string_view memory_kind_name(MemoryKind kind);

class MemoryTracker {
 public:
  // Host memory (AlignedBuffer).
  static MemoryTracker& global();
  // Device memory (DeviceBuffer, core/device_buffer.hpp).
  static MemoryTracker& device();
  // Where a job on `device` counts its model, gradients, optimizer state and
  // activations: global() on the CPU, device() on any other (a GPU's memory,
  // cpu-guarded's guarded memory).
  static MemoryTracker& of(const Device& device);

  void add(MemoryKind kind, size_t bytes);
  void sub(MemoryKind kind, size_t bytes);
  size_t current(MemoryKind kind) const;
  size_t peak(MemoryKind kind) const;
  size_t current_total() const;
  size_t peak_total() const;
  // Forgets peaks (not current bytes): used between phases of a test or bench.
  void reset_peaks();

 private:
  std::array<std::atomic<size_t>, kMemoryKindCount> current_{};
  std::array<std::atomic<size_t>, kMemoryKindCount> peak_{};
  std::atomic<size_t> current_total_{0};
  std::atomic<size_t> peak_total_{0};
};

}  // namespace meshtrain
