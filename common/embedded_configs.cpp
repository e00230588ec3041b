#include <fmt/format.h>

#include <algorithm>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"

namespace common {

std::vector<std::string> embedded_names(const std::string& kind) {
  std::vector<std::string> out;
  const std::string prefix = kind + "/";
  for (const auto& c : embedded_configs()) {
    std::string key = c.key;
    if (key.rfind(prefix, 0) == 0 && key.find('/', prefix.size()) == std::string::npos)
      out.push_back(key.substr(prefix.size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

ConfigText resolve_config(const std::string& kind, const std::string& name_or_path, bool as_written) {
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 5 && name_or_path.ends_with(".yaml")) ||
                       name_or_path.ends_with(".yml");
  if (is_path) return {read_text_file(name_or_path), name_or_path};
  const std::string key = kind + "/" + name_or_path;
  for (const auto& c : embedded_configs())
    if (key == c.key) return {as_written ? c.text : c.yaml, "configs/" + key + ".yaml (embedded)"};
  std::string singular = kind.substr(0, kind.size() - 1);
  throw ConfigError(name_or_path, "", fmt::format("unknown {} (known: {}; or give a path to a .yaml file)",
                                                  singular, fmt::join(embedded_names(kind), ", ")));
}

}  // namespace common
