#include "meshtrain/core/param_store.hpp"

#include "meshtrain/core/error.hpp"

namespace meshtrain {

size_t ParamStore::declare(std::string name, Shape shape, bool weight_decay) {
  if (allocated_) throw Error("ParamStore: declare('" + name + "') after allocate()");
  if (by_name_.count(name)) throw Error("ParamStore: tensor '" + name + "' declared twice");
  ParamView view;
  view.numel = static_cast<size_t>(numel(shape));
  view.name = std::move(name);
  view.shape = std::move(shape);
  view.offset = flat_size_;
  view.weight_decay = weight_decay;
  flat_size_ += (view.numel + kAlignElems - 1) / kAlignElems * kAlignElems;
  by_name_.emplace(view.name, views_.size());
  views_.push_back(std::move(view));
  return views_.size() - 1;
}

void ParamStore::allocate() {
  if (allocated_) throw Error("ParamStore: allocate() called twice");
  params_.resize(flat_size_);
  grads_.resize(flat_size_);
  allocated_ = true;
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

}  // namespace meshtrain
