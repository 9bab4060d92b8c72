#pragma once
// Reading a JobConfig from TOML and `--section.key=value` overrides. Every
// key is declared once in a table (name, type, range or choices, meaning);
// an unknown key, a wrong type or an out-of-range value is a ConfigError
// that names the key and where it came from, never a silent default.
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/train/config/job_config.hpp"

namespace meshtrain {

// Parses a TOML file into a config over the defaults.
JobConfig load_job_config(const std::string& path);
// The file, then the command line's --section.key=value overrides over it,
// validated once at the end: a file need not be a valid job alone when the
// command line completes it (--nproc's parallel.workers with a
// --parallel.tensor and --parallel.pipeline layout). Anything else is a
// ConfigError.
JobConfig load_job_config(const std::string& path, const std::vector<std::string>& overrides);
// Parses TOML text; `origin` names it in messages (a file path or "<string>").
JobConfig parse_job_config(std::string_view toml_text, const std::string& origin);
// Applies one "section.key=value" override (without the leading "--").
// The value is read as a TOML value; bare words are taken as strings.
void apply_override(JobConfig& config, std::string_view assignment);
// Applies command-line arguments of the form --section.key=value, then
// validates the result. Anything else is a ConfigError.
void apply_overrides(JobConfig& config, const std::vector<std::string>& args);
// Throws the ConfigError every config check raises: "<origin>: <key>: <what>".
[[noreturn]] void fail_config(const std::string& origin, const std::string& key, const std::string& what);
// Checks relations between keys (heads divide width, ...). Called by the
// parsers; call it again after overrides.
void validate_job_config(const JobConfig& config);
// The config as TOML text with every key, so it can travel in a checkpoint
// and be parsed back into an equal config.
std::string job_config_to_toml(const JobConfig& config);
// One line per key: "section.key  type  default  meaning", for --help.
std::string job_config_reference();

}  // namespace meshtrain
