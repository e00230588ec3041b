// defines: common::ConfigReader, parse_yaml, read_text_file (strict YAML mapping reader)
#pragma once
#include <set>
#include <string>
#include <vector>

#include "common/config_error.hpp"
#include "common/yaml_node.hpp"

namespace common {

/// @brief Parses YAML text (its first document, with libyaml: common/yaml_node.hpp); a syntax error
/// becomes a ConfigError naming the source and line. Also refuses duplicate keys, keys that are not
/// plain scalars and documents of more than limits::kMaxYamlNodes nodes (aliases expanded), naming
/// the source and the key path.
YamlNode parse_yaml(const std::string& text, const std::string& source);
/// @brief Reads a regular file of at most limits::kMaxInputFileBytes into a string; throws
/// ConfigError naming the path for anything else (missing, a FIFO, a device, a folder, too large).
std::string read_text_file(const std::string& path);

/// @brief Reads one YAML mapping strictly: every key must be consumed, types are checked,
/// and errors name source, dotted key path and the expectation. Refuses unknown keys in finish().
class ConfigReader {
 public:
  ConfigReader(YamlNode node, std::string source, std::string prefix = "");

  bool has(const std::string& key) const;
  /// True if `key` is present and is a mapping (a nested section) rather than a scalar.
  bool is_mapping(const std::string& key) const;
  std::string str(const std::string& key);
  std::string str_or(const std::string& key, const std::string& fallback);
  /// A sequence of scalars ([a, b, c]); empty when the key is absent.
  std::vector<std::string> strings_or_empty(const std::string& key);
  /// A finite number (YAML .nan / .inf are refused).
  double number(const std::string& key);
  /// A finite number in [lo, hi].
  double number_in(const std::string& key, double lo, double hi);
  /// A finite number in (0, hi].
  double positive(const std::string& key, double hi = 1e15);
  /// A fraction in (0, 1].
  double fraction(const std::string& key);
  double number_or(const std::string& key, double fallback);
  /// An integer that fits 64 bits (more digits are refused, not truncated).
  long long integer(const std::string& key);
  /// An integer in [lo, hi].
  long long integer_in(const std::string& key, long long lo, long long hi);
  /// An integer in [lo, hi] as an int (checked before narrowing).
  int int_in(const std::string& key, int lo, int hi);
  /// An integer in [1, hi].
  long long positive_integer(const std::string& key, long long hi = (1LL << 53));
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
  YamlNode scalar(const std::string& key);
  YamlNode node_;
  std::string source_;
  std::string prefix_;
  std::set<std::string> used_;
};

}  // namespace common
