// defines: common::ConfigError (bad input: a one-line error naming the file or flag, the key and
//          what was expected)
#pragma once
#include <stdexcept>
#include <string>

namespace common {

/// @brief Bad input: names the file (or source), the key and what was expected.
/// The message is one line; cli/ prints it and exits non-zero.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& source, const std::string& key, const std::string& what)
      : std::runtime_error(source + (key.empty() ? "" : ": " + key) + ": " + what) {}
  /// The error again from its whole message (what() of a ConfigError), as one carried as data
  /// (common/plugin_error.hpp) is thrown again.
  struct WholeMessage {};
  static constexpr WholeMessage whole_message{};
  ConfigError(WholeMessage, const std::string& message) : std::runtime_error(message) {}
};

}  // namespace common
