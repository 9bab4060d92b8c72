#pragma once
// The names of an enum's values, in one table per enum that both parsing and
// printing read, so a config file, a command-line choice and an error message
// cannot disagree. An enum declares its table beside itself and makes it
// findable by argument-dependent lookup:
//
//   enum class LrDecay { Cosine, Linear, Constant };
//   inline constexpr EnumName<LrDecay> kLrDecayNames[] = {
//       {LrDecay::Cosine, "cosine"}, {LrDecay::Linear, "linear"}, {LrDecay::Constant, "constant"}};
//   constexpr std::span<const EnumName<LrDecay>> enum_names(LrDecay) { return kLrDecayNames; }
//
// Then enum_name(LrDecay::Linear) is "linear" (enum_string: a std::string), parse_enum<LrDecay>("linear")
// is LrDecay::Linear, and enum_choices<LrDecay>() is "cosine, linear, constant".
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value` ("?" for a value outside the table).
template <class E>
constexpr std::string_view enum_name(E value) {
  for (const EnumName<E>& n : enum_names(E{}))
    if (n.value == value) return n.name;
  return "?";
}

// The same as a std::string, for building messages.
template <class E>
std::string enum_string(E value) {
  return std::string(enum_name(value));
}

// The value named `name`; nullopt for any other name.
template <class E>
constexpr std::optional<E> parse_enum(std::string_view name) {
  for (const EnumName<E>& n : enum_names(E{}))
    if (n.name == name) return n.value;
  return std::nullopt;
}

// Every name, in table order.
template <class E>
std::vector<std::string> enum_name_list() {
  std::vector<std::string> names;
  for (const EnumName<E>& n : enum_names(E{})) names.emplace_back(n.name);
  return names;
}

// Every name, in table order, as "a, b, c" (for messages).
template <class E>
std::string enum_choices() {
  std::string text;
  for (const EnumName<E>& n : enum_names(E{})) text += (text.empty() ? "" : ", ") + std::string(n.name);
  return text;
}

}  // namespace meshtrain
