// defines: common::parse_json_strict (nlohmann::json::parse for untrusted files: duplicate keys and
//          deep nesting refused, syntax errors as one-line ConfigErrors naming the file)
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace common {

/// Deepest nesting of arrays and objects accepted in an input JSON file. slicetune's own files
/// nest at most 4 deep (graph: tasks[i].shape); the cap keeps the recursive dump()/get() paths of
/// nlohmann::json far from the stack's end on hostile input ("[[[[..." 64 MiB deep).
inline constexpr int kMaxJsonDepth = 64;

/// @brief Parses `text` (read from `source`) refusing what a reader would silently misread or crash
/// on: a key twice in one object (the parser would keep the last), nesting deeper than
/// kMaxJsonDepth. Errors throw common::ConfigError naming `source`; `what` says what the file should
/// be ("a `slicetune run --json` output") in the syntax-error message.
nlohmann::json parse_json_strict(const std::string& text, const std::string& source, const std::string& what);

}  // namespace common
