#include "meshtrain/core/function_ref.hpp"

#include <gtest/gtest.h>

#include <string>

namespace meshtrain {
namespace {

int apply(FunctionRef<int(int, int)> f, int a, int b) { return f(a, b); }

TEST(FunctionRef, CallsTheCallableWithItsArgumentsAndReturnsItsResult) {
  EXPECT_EQ(apply([](int a, int b) { return 10 * a + b; }, 4, 2), 42);
}

TEST(FunctionRef, RefersToTheCallableInsteadOfCopyingIt) {
  int calls = 0;
  auto counter = [&calls, seen = 0]() mutable {
    ++calls;
    return ++seen;
  };
  FunctionRef<int()> ref(counter);
  EXPECT_EQ(ref(), 1);
  EXPECT_EQ(ref(), 2);
  EXPECT_EQ(counter(), 3);  // the state the reference advanced is the original's
  EXPECT_EQ(calls, 3);
}

TEST(FunctionRef, ConvertsTheResultToTheDeclaredType) {
  auto literal = [] { return "text"; };
  FunctionRef<std::string()> ref(literal);
  EXPECT_EQ(ref(), "text");
}

TEST(FunctionRef, CopiesReferToTheSameCallable) {
  int value = 1;
  auto read = [&] { return value; };
  FunctionRef<int()> first(read);
  FunctionRef<int()> second = first;  // a copy of the reference, not of a reference to it
  value = 7;
  EXPECT_EQ(second(), 7);
}

}  // namespace
}  // namespace meshtrain
