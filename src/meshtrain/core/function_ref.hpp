#pragma once
// FunctionRef<R(Args...)>: a non-owning reference to a callable, for a
// parameter that is only called before the function taking it returns.
// Unlike std::function it never copies the callable or allocates, which
// matters on paths that run once per collective (a std::function holding a
// lambda of more than two pointers allocates on every call).
//
// It refers to the callable it was built from: never keep one longer than
// that callable lives, e.g. in a member, or in a queued task that nobody
// waits for before returning.
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace meshtrain {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f)  // NOLINT: implicit, so callers pass a lambda
      : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* callable, Args... args) -> R {
          return std::invoke(*static_cast<std::remove_reference_t<F>*>(callable), std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

 private:
  void* callable_;
  R (*call_)(void*, Args...);
};

}  // namespace meshtrain
