#pragma once
// Reading a PlanInput from `section.key = value` pairs: a TOML file's, then
// `--section.key=value` flags over them (the same keys). Every key is
// declared once in a table with its meaning; unknown keys and malformed
// values are ConfigErrors naming the key and where it came from.
//
// hardware.device picks a profile (hardware.hpp), which brings its memory,
// FLOP/s, node size and links; the other hardware.* keys then override
// single figures, and hardware.device = "custom" takes them all from keys.
#include <map>
#include <string>
#include <vector>

#include "meshtrain/plan/plan_input.hpp"

namespace meshtrain::plan {

// key -> (value as text, where it came from)
struct PlanValue {
  std::string text;
  std::string origin;
};
using PlanValues = std::map<std::string, PlanValue>;

// Adds the keys of a TOML file (a later call overrides earlier ones).
void read_plan_file(const std::string& path, PlanValues& values);
// Adds "--section.key=value" arguments; anything else is a ConfigError.
void read_plan_flags(const std::vector<std::string>& args, PlanValues& values);

// Resolves profiles and builds the input (not validated: make_plan does).
PlanInput plan_input_from(const PlanValues& values);

// One line per key, for --help.
std::string plan_keys_reference();

}  // namespace meshtrain::plan
