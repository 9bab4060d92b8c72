#include "meshtrain/core/param_store.hpp"

#include <algorithm>

#include "meshtrain/core/error.hpp"

namespace meshtrain {

size_t global_index(const Shape& global, const Placement& p, size_t local) {
  if (p.replicated()) return local;
  const auto d = static_cast<size_t>(p.dim);
  // Strides of the local view: only dimension d is smaller than the global.
  const int64_t block = global[d] / p.blocks, part = block / p.parts;
  int64_t inner = 1;
  for (size_t k = d + 1; k < global.size(); ++k) inner *= global[k];
  const int64_t local_d = part * p.blocks;
  const auto l = static_cast<int64_t>(local);
  const int64_t outer_i = l / (local_d * inner), rest = l % (local_d * inner);
  const int64_t di = rest / inner, inner_i = rest % inner;
  const int64_t global_d = (di / part) * block + p.index * part + di % part;
  return static_cast<size_t>((outer_i * global[d] + global_d) * inner + inner_i);
}

size_t ParamStore::declare(std::string name, Shape global_shape, bool weight_decay, Placement placement) {
  if (replica_) {
    auto it = by_name_.find(name);
    const ParamView* v = it == by_name_.end() ? nullptr : &views_[it->second];
    if (!v || v->global_shape != global_shape || v->placement.dim != placement.dim ||
        v->placement.parts != placement.parts || v->placement.index != placement.index ||
        v->placement.blocks != placement.blocks)
      throw Error("ParamStore: a replica declares tensor '" + name + "' " + shape_string(global_shape) +
                  (v ? ", which was declared with another shape or placement" : ", which was never declared"));
    return it->second;
  }
  Shape shape = global_shape;
  if (!placement.replicated()) {
    const bool fits = placement.dim < static_cast<int>(shape.size()) && placement.parts >= 1 && placement.blocks >= 1 &&
                      placement.index >= 0 && placement.index < placement.parts &&
                      shape[static_cast<size_t>(placement.dim)] % (placement.blocks * placement.parts) == 0;
    if (!fits)
      throw Error("ParamStore: tensor '" + name + "' " + shape_string(global_shape) + " cannot be cut along dim " +
                  std::to_string(placement.dim) + " into " + std::to_string(placement.blocks) + " block(s) of " +
                  std::to_string(placement.parts) + " parts");
    shape[static_cast<size_t>(placement.dim)] /= placement.parts;
  }
  const size_t index = declare(std::move(name), std::move(shape), weight_decay);
  views_[index].global_shape = std::move(global_shape);
  views_[index].placement = placement;
  return index;
}

size_t ParamStore::declare(std::string name, Shape shape, bool weight_decay) {
  if (replica_) return declare(std::move(name), std::move(shape), weight_decay, Placement{});
  if (allocated_) throw Error("ParamStore: declare('" + name + "') after allocate()");
  if (by_name_.count(name)) throw Error("ParamStore: tensor '" + name + "' declared twice");
  ParamView view;
  view.numel = static_cast<size_t>(numel(shape));
  view.name = std::move(name);
  view.global_shape = shape;
  view.shape = std::move(shape);
  view.offset = flat_size_;
  view.weight_decay = weight_decay;
  view.expert = declaring_experts_;
  flat_size_ += (view.numel + kAlignElems - 1) / kAlignElems * kAlignElems;
  if (!in_named_unit_ && !open_whole_step_) {
    units_.push_back({.name = view.name, .first_view = views_.size(), .end_view = views_.size(),
                      .begin = view.offset, .end = view.offset, .whole_step = true});
    open_whole_step_ = true;
  }
  ParamUnit& unit = units_.back();
  unit.end_view = views_.size() + 1;
  unit.end = flat_size_;
  unit_of_view_.push_back(units_.size() - 1);
  by_name_.emplace(view.name, views_.size());
  views_.push_back(std::move(view));
  return views_.size() - 1;
}

size_t ParamStore::begin_unit(std::string name) {
  if (replica_) {
    for (size_t u = 0; u < units_.size(); ++u)
      if (units_[u].name == name && !units_[u].whole_step) return u;
    throw Error("ParamStore: a replica opens unit '" + name + "', which was never declared");
  }
  if (allocated_) throw Error("ParamStore: begin_unit('" + name + "') after allocate()");
  if (in_named_unit_) throw Error("ParamStore: begin_unit('" + name + "') inside unit '" + units_.back().name + "'");
  units_.push_back({.name = std::move(name), .first_view = views_.size(), .end_view = views_.size(),
                    .begin = flat_size_, .end = flat_size_, .whole_step = false});
  in_named_unit_ = true;
  open_whole_step_ = false;
  return units_.size() - 1;
}

void ParamStore::end_unit() {
  if (replica_) return;
  if (!in_named_unit_) throw Error("ParamStore: end_unit() without begin_unit()");
  in_named_unit_ = false;
}

void ParamStore::begin_replica() {
  if (!allocated_) throw Error("ParamStore: a replica binds to allocated views; allocate() first");
  if (replica_) throw Error("ParamStore: replica scopes do not nest");
  replica_ = true;
}

void ParamStore::end_replica() { replica_ = false; }

void ParamStore::allocate() {
  if (allocated_) throw Error("ParamStore: allocate() called twice");
  if (in_named_unit_) throw Error("ParamStore: allocate() inside unit '" + units_.back().name + "'");
  float* params = nullptr;
  float* grads = nullptr;
  if (on_host()) {
    params_.resize(flat_size_);
    grads_.resize(flat_size_);
    params = params_.data();
    grads = grads_.data();
  } else {
    device_params_ = DeviceBuffer<float>(*device_memory_, flat_size_, MemoryKind::Parameters);
    device_grads_ = DeviceBuffer<float>(*device_memory_, flat_size_, MemoryKind::Gradients);
    device_params_.zero();
    device_grads_.zero();
    params = device_params_.ptr().raw();
    grads = device_grads_.ptr().raw();
  }
  param_ptr_.resize(views_.size());
  grad_ptr_.resize(views_.size());
  for (size_t v = 0; v < views_.size(); ++v) {
    param_ptr_[v] = params + views_[v].offset;
    grad_ptr_[v] = grads + views_[v].offset;
  }
  allocated_ = true;
}

void ParamStore::set_device(Device device, DeviceAllocator* memory) {
  if (allocated_) throw Error("ParamStore: set_device() after allocate()");
  if (!device.is_cpu() && !memory)
    throw Error("ParamStore: a store on " + device_name(device) + " needs that device's memory");
  device_ = device;
  device_memory_ = device.is_cpu() ? nullptr : memory;
}

void ParamStore::require_device(const char* what) const {
  if (on_host()) throw Error(std::string("ParamStore::") + what + ": the store is in host memory, not on a device");
}

void ParamStore::refuse_host_access(const char* what) const {
  throw Error(std::string("ParamStore::") + what + ": the parameters and gradients live on " + device_name(device_) +
              ", not in host memory (upload_params / download_params)");
}

namespace {
void check_flat(const char* what, size_t got, size_t want) {
  if (got != want)
    throw Error(std::string("ParamStore::") + what + ": " + std::to_string(got) + " elements for a flat buffer of " +
                std::to_string(want));
}
}  // namespace

void ParamStore::upload_params(std::span<const float> flat) {
  check_flat("upload_params", flat.size(), flat_size_);
  if (on_host())
    std::copy(flat.begin(), flat.end(), params_.data());
  else
    device_params_.upload(flat);
}

void ParamStore::download_params(std::span<float> flat) const {
  check_flat("download_params", flat.size(), flat_size_);
  if (on_host())
    std::copy(params_.data(), params_.data() + flat_size_, flat.begin());
  else
    device_params_.download(flat);
}

void ParamStore::download_grads(std::span<float> flat) const {
  check_flat("download_grads", flat.size(), flat_size_);
  if (on_host())
    std::copy(grads_.data(), grads_.data() + flat_size_, flat.begin());
  else
    device_grads_.download(flat);
}

void ParamStore::download_params_range(size_t begin, std::span<float> part) const {
  require_device("download_params_range()");
  device_params_.download(part, begin);
}

void ParamStore::upload_params_range(size_t begin, std::span<const float> part) {
  require_device("upload_params_range()");
  device_params_.upload(part, begin);
}

void ParamStore::download_grads_range(size_t begin, std::span<float> part) const {
  require_device("download_grads_range()");
  device_grads_.download(part, begin);
}

void ParamStore::upload_grads_range(size_t begin, std::span<const float> part) {
  require_device("upload_grads_range()");
  device_grads_.upload(part, begin);
}

void ParamStore::fill_params_on_host(FunctionRef<void()> fill) {
  if (on_host()) return fill();
  AlignedBuffer<float> host(flat_size_, MemoryKind::Parameters);
  download_params(host.span());
  std::vector<float*> on_device(views_.size());
  for (size_t v = 0; v < views_.size(); ++v) {
    on_device[v] = param_ptr_[v];
    param_ptr_[v] = host.data() + views_[v].offset;
  }
  try {
    fill();
  } catch (...) {
    param_ptr_ = on_device;
    throw;
  }
  param_ptr_ = std::move(on_device);
  upload_params(host.span());
}

namespace {
void point_views_at(std::vector<float*>& ptrs, const std::vector<ParamView>& views, const ParamUnit& unit, float* base) {
  for (size_t v = unit.first_view; v < unit.end_view; ++v)
    ptrs[v] = base ? base + (views[v].offset - unit.begin) : nullptr;
}
}  // namespace

void ParamStore::bind_unit_params(size_t unit, float* base) { point_views_at(param_ptr_, views_, units_.at(unit), base); }
void ParamStore::bind_unit_grads(size_t unit, float* base, bool zeroed) {
  const ParamUnit& u = units_.at(unit);
  point_views_at(grad_ptr_, views_, u, base);
  grad_zeroed_.resize(views_.size(), 0);
  for (size_t v = u.first_view; v < u.end_view; ++v) grad_zeroed_[v] = zeroed && base;
}

void ParamStore::release_flat_params() {
  params_ = AlignedBuffer<float>(MemoryKind::Parameters);
  device_params_ = DeviceBuffer<float>();
  for (auto& p : param_ptr_) p = nullptr;
  params_released_ = true;
}

void ParamStore::release_flat_grads() {
  grads_ = AlignedBuffer<float>(MemoryKind::Gradients);
  device_grads_ = DeviceBuffer<float>();
  for (auto& g : grad_ptr_) g = nullptr;
  grad_zeroed_.assign(views_.size(), 0);
}

const ParamView* ParamStore::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &views_[it->second];
}

size_t ParamStore::parameter_count() const {
  size_t n = 0;
  for (const auto& v : views_) n += v.numel;
  return n;
}

size_t ParamStore::global_parameter_count() const {
  size_t n = 0;
  for (const auto& v : views_) n += static_cast<size_t>(numel(v.global_shape));
  return n;
}

}  // namespace meshtrain
