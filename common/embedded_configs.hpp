// defines: common::embedded_configs, resolve_config (name-or-path -> YAML text and source)
#pragma once
#include <string>
#include <vector>

namespace common {

struct EmbeddedConfig {
  const char* key;   ///< "models/gpt3-13b", "clusters/dgx-h100"
  const char* text;  ///< the YAML file as it was at build time
  /// What the readers parse: a YAML file line for line without its comments (the same tree, with the
  /// same line and column for every node; the default cluster file is 6.8 KB with its comments,
  /// 1.4 KB without, and the scanner reads every character of them); a JSON file as it is. cmake/embed_configs.cmake, tests/hardening/test_embedded.cpp.
  const char* yaml;
};

/// @brief Every YAML file under configs/, embedded at build time (cmake/embed_configs.cmake).
const std::vector<EmbeddedConfig>& embedded_configs();

struct ConfigText {
  std::string text;
  std::string source;  ///< the path, or "configs/<kind>/<name>.yaml (embedded)"
};

/// @brief A name (looked up among the embedded configs of `kind`, e.g. "models") or a path to a
/// file (anything containing '/' or ending in .yaml). Unknown names list what exists. An embedded
/// config comes without its comments (EmbeddedConfig::yaml) unless `as_written` (for a command that
/// rewrites the file, keeping its comments: calibrate).
ConfigText resolve_config(const std::string& kind, const std::string& name_or_path, bool as_written = false);

/// @brief Names of the embedded configs of one kind, sorted.
std::vector<std::string> embedded_names(const std::string& kind);

}  // namespace common
