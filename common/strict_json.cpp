#include "common/strict_json.hpp"

#include <fmt/format.h>

#include <vector>

#include "common/config_error.hpp"

namespace common {

nlohmann::json parse_json_strict(const std::string& text, const std::string& source, const std::string& what) {
  using json = nlohmann::json;
  std::vector<std::vector<std::string>> keys;  // per open object: its keys so far
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    using E = json::parse_event_t;
    if ((ev == E::object_start || ev == E::array_start) && depth >= kMaxJsonDepth)
      throw ConfigError(source, "", fmt::format("nested deeper than {} arrays/objects", kMaxJsonDepth));
    if (ev == E::object_start) {
      keys.emplace_back();
    } else if (ev == E::object_end && !keys.empty()) {
      keys.pop_back();
    } else if (ev == E::key && !keys.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      // objects of slicetune's files have a few dozen keys; beyond, unknown keys are refused by
      // the readers anyway, and the linear search stays bounded
      for (const auto& seen : keys.back())
        if (seen == k) throw ConfigError(source, k, "duplicate key");
      if (keys.back().size() < 256) keys.back().push_back(k);
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const json::exception& e) {
    throw ConfigError(source, "", fmt::format("not {}: {}", what, e.what()));
  }
}

}  // namespace common
