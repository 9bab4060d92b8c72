#pragma once
// All parameters of a model in one contiguous fp32 buffer, their gradients in
// another of the same layout. Each tensor is a named view (offset, shape).
// Data-parallel buckets, ZeRO shards and checkpoints are ranges and views of
// these two buffers; no strategy copies parameters into a layout of its own.
//
// Units: consecutive views form units (a transformer block, the embeddings),
// the granularity at which ZeRO-3 gathers parameters and ZeRO-2/3 reduce
// gradients. A layer that owns a unit (nn::Block) declares it with
// begin_unit() / end_unit() and wraps its forward and backward in a
// UnitScope; every run of views declared outside such a unit becomes a
// "whole-step" unit, needed from the start of forward to the end of backward
// (the tied embedding is read by the first and the last layer).
//
// Layers reach their tensors only through param(i) / grad(i), so a strategy
// can point a unit's views at other memory (bind_unit_params/grads: a
// gathered copy, a gradient staging buffer) and free the flat buffers.
//
// Life cycle: a model declares every tensor, then calls allocate() once.
//
// Replicas: layers built while a ReplicaScope is open (after allocate())
// declare nothing new: each declare() and begin_unit() returns the view or
// unit already declared under that name (same global shape and placement, or
// an Error). A pipeline stage keeps one replica of its layers per micro-batch
// in flight: the replicas share the parameters and gradients and own their
// activations (nn/gpt.hpp's activation slots).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "meshtrain/core/aligned_buffer.hpp"
#include "meshtrain/core/device.hpp"
#include "meshtrain/core/function_ref.hpp"
#include "meshtrain/core/device_buffer.hpp"
#include "meshtrain/core/precision.hpp"
#include "meshtrain/core/shape.hpp"

namespace meshtrain {

struct ParamUnit {
  std::string name;               // the block's prefix, or the first view's name
  size_t first_view = 0, end_view = 0;  // views [first_view, end_view)
  size_t begin = 0, end = 0;      // flat element range, padding included
  bool whole_step = false;        // needed through all of forward and backward
  size_t size() const { return end - begin; }
};

enum class UnitPass { Forward, Backward };

// Told when a unit's forward or backward starts and ends (ZeRO-3 gathers
// and frees parameters there, ZeRO-2/3 reduce the unit's gradients).
class UnitObserver {
 public:
  virtual ~UnitObserver() = default;
  virtual void before_unit(size_t unit, UnitPass pass) = 0;
  virtual void after_unit(size_t unit, UnitPass pass) = 0;
};

// Where a view's elements sit in the global tensor of the one-process model
// (what checkpoints name and consolidate reassembles). Replicated: the view is
// the whole tensor. Sharded: the tensor's dimension `dim` is cut into `parts`
// equal shards and the view holds shard `index`. A fused tensor (GPT-2's
// c_attn holds q, k and v side by side) has `blocks` > 1: `dim` is first cut
// into that many equal blocks, and the shard takes part `index` of every
// block, so each tensor-parallel rank holds its heads' q, k and v.
struct Placement {
  int dim = -1;  // -1: replicated
  int parts = 1;
  int index = 0;
  int blocks = 1;
  bool replicated() const { return dim < 0; }
  static Placement sharded(int dim, int parts, int index, int blocks = 1) { return {dim, parts, index, blocks}; }
};

// The global index (row-major, in `global` shape) of element `local` of a
// view placed as `p`.
size_t global_index(const Shape& global, const Placement& p, size_t local);

struct ParamView {
  std::string name;    // e.g. "h.0.attn.c_attn.weight" (Hugging Face GPT-2 names for GPT)
  Shape shape;         // this rank's part
  Shape global_shape;  // the whole tensor's; equal to shape when replicated
  Placement placement;
  size_t offset = 0;   // in elements, into the flat buffers
  size_t numel = 0;
  bool weight_decay = true;  // false for biases, norms (AdamW's usual exclusion)
  // An expert's tensor (nn/moe/): under expert parallelism each rank of an
  // expert group holds other experts, so its gradient is reduced over the
  // data ranks holding the same experts, not over all of them.
  bool expert = false;
};

class ParamStore {
 public:
  // Each view starts on a 16-element (64-byte) boundary so kernels see aligned rows.
  static constexpr size_t kAlignElems = 16;

  // Declares a tensor; returns its index. Only before allocate().
  size_t declare(std::string name, Shape shape, bool weight_decay);
  // Declares this rank's part of the tensor of `global_shape` placed as
  // `placement`. Throws Error naming the tensor when its dimension does not
  // split into blocks x parts.
  size_t declare(std::string name, Shape global_shape, bool weight_decay, Placement placement);
  // Views declared from here to end_unit() form one unit; returns its index
  // among the declared units. Units do not nest.
  size_t begin_unit(std::string name);
  void end_unit();
  // Ends the whole-step unit being declared: the next view outside a named
  // unit starts another. A tensor alone in its unit is sliced by ZeRO on
  // its own, the same on every store that holds it (a pipeline's tied
  // embedding on its first and last stage).
  void close_whole_step_unit() { open_whole_step_ = false; }
  // Views declared while expert declaration is on are marked expert
  // (ParamView::expert); ExpertScope below.
  void set_declaring_experts(bool on) { declaring_experts_ = on; }
  // While open, declarations bind to existing views (the header comment).
  void begin_replica();
  void end_replica();
  // Allocates both buffers (zeroed) and closes the unit list. Only once.
  void allocate();
  bool allocated() const { return allocated_; }

  float* param(size_t index) { return param_ptr_[index]; }
  const float* param(size_t index) const { return param_ptr_[index]; }

  // The device the parameters, gradients and the layers' kernels live on
  // (training.device): layers and optimizers run their kernels through
  // kernels::backend_for(device()). Set once, before the model's layers are
  // built (a loss and an optimizer keep the backend they were built with).
  // Off the CPU, `memory` (that device's backend's allocator) holds the two
  // flat buffers: param(i) and grad(i) then point into device memory, the
  // host spans params() / grads() are refused (Error), and values cross
  // only through upload_params / download_params / download_grads.
  void set_device(Device device, DeviceAllocator* memory = nullptr);
  const Device& device() const { return device_; }
  bool on_host() const { return device_.is_cpu(); }
  // The device's memory off the CPU (what the host-staged path copies
  // through, core/staged_buffer.hpp); null on the CPU.
  DeviceAllocator* device_memory() const { return device_memory_; }
  // The whole flat parameter buffer (flat_size() elements, padding
  // included) to or from the store's memory, on any device: initialisation
  // and checkpoints.
  void upload_params(std::span<const float> flat);
  void download_params(std::span<float> flat) const;
  void download_grads(std::span<float> flat) const;
  // Elements [begin, begin + part.size()) of a store off the CPU, to or
  // from host memory: what the host-staged collectives move (Error on the
  // CPU, where the flat buffers are host memory already).
  void download_params_range(size_t begin, std::span<float> part) const;
  void upload_params_range(size_t begin, std::span<const float> part);
  void download_grads_range(size_t begin, std::span<float> part) const;
  void upload_grads_range(size_t begin, std::span<const float> part);
  // Runs `fill` with param(i) pointing into a host copy of the parameters,
  // then uploads it: initialisation on any device (on the CPU, fill writes
  // the store itself).
  void fill_params_on_host(FunctionRef<void()> fill);

  // The precision the layers' matrix products run in (core/precision.hpp):
  // the parameters themselves stay fp32. Set once, before the first forward.
  void set_compute_precision(Precision p) { compute_precision_ = p; }
  Precision compute_precision() const { return compute_precision_; }
  bool bf16_products() const { return compute_precision_ == Precision::Bf16; }
  float* grad(size_t index) { return grad_ptr_[index]; }
  const float* grad(size_t index) const { return grad_ptr_[index]; }

  // Units in flat order (after allocate()); unit_of_view(v) is v's unit.
  const std::vector<ParamUnit>& units() const { return units_; }
  size_t unit_of_view(size_t view) const { return unit_of_view_[view]; }
  // Points the views of `unit` at base[view.offset - unit.begin] (the unit's
  // flat range laid out from base), for parameters or gradients. nullptr
  // detaches them (a use before the next bind is a bug and crashes).
  // `zeroed`: the caller has just zeroed the gradients at base
  // (claim_zeroed_grad below).
  void bind_unit_params(size_t unit, float* base);
  void bind_unit_grads(size_t unit, float* base, bool zeroed = false);
  // Frees the flat parameter or gradient buffer (ZeRO-3 / ZeRO-2 keep only
  // shards): params() / grads() are then empty and every view is detached
  // until bound.
  void release_flat_params();
  void release_flat_grads();
  // Whether the parameters exist only while their unit runs (ZeRO-3, after
  // release_flat_params()): a layer then keeps no copy of them between its
  // forward and its backward (Linear's bf16 weight copy).
  bool params_transient() const { return params_released_; }

  void set_unit_observer(UnitObserver* observer) { unit_observer_ = observer; }
  void before_unit(size_t unit, UnitPass pass) {
    if (unit_observer_) unit_observer_->before_unit(unit, pass);
  }
  void after_unit(size_t unit, UnitPass pass) {
    if (unit_observer_) unit_observer_->after_unit(unit, pass);
  }

  // The flat buffers as host memory: a store on the CPU only.
  std::span<float> params() {
    require_host("params()");
    return params_.span();
  }
  std::span<const float> params() const {
    require_host("params()");
    return params_.span();
  }
  std::span<float> grads() {
    require_host("grads()");
    return grads_.span();
  }
  std::span<const float> grads() const {
    require_host("grads()");
    return grads_.span();
  }
  // The flat buffers wherever they live (device memory off the CPU): for a
  // backend call (kernels/backend.hpp) only, never a host loop.
  std::span<float> kernel_params() {
    return on_host() ? params_.span() : std::span<float>(device_params_.ptr().raw(), device_params_.size());
  }
  std::span<float> kernel_grads() {
    return on_host() ? grads_.span() : std::span<float>(device_grads_.ptr().raw(), device_grads_.size());
  }
  std::span<const float> kernel_params() const { return const_cast<ParamStore*>(this)->kernel_params(); }
  void zero_grads() {
    if (on_host())
      grads_.zero();
    else
      device_grads_.zero();
    grad_zeroed_.assign(views_.size(), 1);
  }
  // Whether tensor `index`'s gradient is known to be all zeros (zero_grads()
  // or a zeroed bind ran since anything claimed it); the flag clears, as the
  // caller now writes it. A layer whose product is the gradient's first
  // contribution then writes it instead of adding to zeros: the same bits
  // (0 + x = x), and oneDNN's bf16 weight-gradient GEMM runs 3-8% faster
  // without its accumulate post-op. Only a tensor's sole writer may claim:
  // every other writer adds to whatever is there.
  bool claim_zeroed_grad(size_t index) {
    if (index >= grad_zeroed_.size() || !grad_zeroed_[index]) return false;
    grad_zeroed_[index] = 0;
    return true;
  }

  // Backward announces each tensor whose gradient is final for this step, so
  // data parallelism can send it while the rest of backward runs. Only a
  // hint: a tensor never announced is treated as ready when backward returns.
  void set_grad_ready_hook(std::function<void(size_t index)> hook) { grad_ready_hook_ = std::move(hook); }
  void grad_ready(size_t index) {
    if (grad_ready_hook_) grad_ready_hook_(index);
  }

  const std::vector<ParamView>& views() const { return views_; }
  const ParamView& view(size_t index) const { return views_[index]; }
  // The view with this name, or nullptr.
  const ParamView* find(std::string_view name) const;
  // Sum of numel over views (excludes alignment padding): this rank's part.
  size_t parameter_count() const;
  // The whole model's: each view's global shape (equal to parameter_count()
  // when every view is replicated).
  size_t global_parameter_count() const;
  // Size of each flat buffer in elements, padding included.
  size_t flat_size() const { return flat_size_; }

 private:
  std::vector<ParamView> views_;
  std::unordered_map<std::string, size_t> by_name_;
  size_t flat_size_ = 0;
  bool allocated_ = false;
  std::vector<ParamUnit> units_;
  std::vector<size_t> unit_of_view_;
  bool in_named_unit_ = false;   // between begin_unit() and end_unit()
  bool open_whole_step_ = false;  // the last unit is an anonymous one still growing
  bool replica_ = false;          // between begin_replica() and end_replica()
  bool declaring_experts_ = false;
  Precision compute_precision_ = Precision::Fp32;
  Device device_;
  DeviceAllocator* device_memory_ = nullptr;  // off the CPU: where the flat buffers live
  DeviceBuffer<float> device_params_, device_grads_;
  void require_host(const char* what) const {
    if (!on_host()) refuse_host_access(what);
  }
  [[noreturn]] void refuse_host_access(const char* what) const;
  void require_device(const char* what) const;
  bool params_released_ = false;
  std::vector<float*> param_ptr_, grad_ptr_;
  std::vector<uint8_t> grad_zeroed_;  // per view: claim_zeroed_grad()
  UnitObserver* unit_observer_ = nullptr;
  AlignedBuffer<float> params_{MemoryKind::Parameters};
  AlignedBuffer<float> grads_{MemoryKind::Gradients};
  std::function<void(size_t)> grad_ready_hook_;
};

// begin_replica() on construction, end_replica() on destruction.
class ReplicaScope {
 public:
  explicit ReplicaScope(ParamStore& store) : store_(store) { store_.begin_replica(); }
  ~ReplicaScope() { store_.end_replica(); }
  ReplicaScope(const ReplicaScope&) = delete;
  ReplicaScope& operator=(const ReplicaScope&) = delete;

 private:
  ParamStore& store_;
};

// Marks the views declared during its life as expert tensors.
class ExpertScope {
 public:
  explicit ExpertScope(ParamStore& store) : store_(store) { store_.set_declaring_experts(true); }
  ~ExpertScope() { store_.set_declaring_experts(false); }
  ExpertScope(const ExpertScope&) = delete;
  ExpertScope& operator=(const ExpertScope&) = delete;

 private:
  ParamStore& store_;
};

// before_unit on construction, after_unit on destruction.
class UnitScope {
 public:
  UnitScope(ParamStore& store, size_t unit, UnitPass pass)
      : store_(store), unit_(unit), pass_(pass), exceptions_(std::uncaught_exceptions()) {
    store_.before_unit(unit_, pass_);
  }
  // Not while unwinding: the step is abandoned, and a second exception
  // would terminate.
  ~UnitScope() noexcept(false) {
    if (std::uncaught_exceptions() == exceptions_) store_.after_unit(unit_, pass_);
  }
  UnitScope(const UnitScope&) = delete;
  UnitScope& operator=(const UnitScope&) = delete;

 private:
  ParamStore& store_;
  size_t unit_;
  UnitPass pass_;
  int exceptions_;
};

}  // namespace meshtrain
