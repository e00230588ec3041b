// defines: common::ConfigError, common::ConfigReader (strict YAML mapping reader)
#pragma once
#include <yaml-cpp/yaml.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace common {

/// @brief Bad input: names the file (or source), the key and what was expected.
/// The message is one line; cli/ prints it and exits non-zero.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& source, const std::string& key, const std::string& what)
      : std::runtime_error(source + (key.empty() ? "" : ": " + key) + ": " + what) {}
};

/// @brief Parses YAML text; a syntax error becomes a ConfigError naming the source and line.
YAML::Node parse_yaml(const std::string& text, const std::string& source);
/// @brief Reads a file into a string; throws ConfigError if it cannot be read.
std::string read_text_file(const std::string& path);

/// @brief Reads one YAML mapping strictly: every key must be consumed, types are checked,
/// and errors name source, dotted key path and the expectation. Refuses unknown keys in finish().
class ConfigReader {
 public:
  ConfigReader(YAML::Node node, std::string source, std::string prefix = "");

  bool has(const std::string& key) const;
  /// True if `key` is present and is a mapping (a nested section) rather than a scalar.
  bool is_mapping(const std::string& key) const;
  std::string str(const std::string& key);
  std::string str_or(const std::string& key, const std::string& fallback);
  /// A sequence of scalars ([a, b, c]); empty when the key is absent.
  std::vector<std::string> strings_or_empty(const std::string& key);
  double number(const std::string& key);
  double positive(const std::string& key);
  double number_or(const std::string& key, double fallback);
  long long integer(const std::string& key);
  long long positive_integer(const std::string& key);
  long long integer_or(const std::string& key, long long fallback);
  /// A YAML sequence of positive integers ([10, 11, 11, 10]); the error names the element ("key[2]").
  std::vector<long long> positive_integer_list(const std::string& key);
  bool boolean(const std::string& key);
  bool boolean_or(const std::string& key, bool fallback);
  /// One of `choices`; the error lists them.
  std::string choice(const std::string& key, const std::vector<std::string>& choices);
  std::string choice_or(const std::string& key, const std::vector<std::string>& choices,
                        const std::string& fallback);
  ConfigReader child(const std::string& key);
  /// Throws if the mapping has keys nobody read.
  void finish() const;

  const std::string& source() const { return source_; }
  std::string path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  YAML::Node scalar(const std::string& key);
  YAML::Node node_;
  std::string source_;
  std::string prefix_;
  std::set<std::string> used_;
};

}  // namespace common
