// defines: common::YamlNode, YamlMark, yaml_to_double, yaml_to_integer, yaml_to_bool, emit_yaml_mapping
// (the YAML tree the config readers read, parsed by libyaml: common/config_reader.hpp, parse_yaml)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace common {

/// Where a node starts in its text: line and column from 0 (line -1: a node built in code).
struct YamlMark {
  int line = -1;
  int column = -1;
  bool is_null() const { return line < 0; }
};

/// @brief A node of a YAML document: null, a scalar (its text), a sequence or a mapping (its
/// entries in document order). A handle: copies share the node (as an alias in the document
/// does); deep_copy makes a node of its own. A default-constructed node is absent - what looking
/// up a key a mapping lacks gives - and is false in a condition; a present null (`key:`, `key: ~`)
/// is true and is_null().
class YamlNode {
 public:
  enum class Type : std::uint8_t { null, scalar, sequence, map };
  struct Entry;

  YamlNode() = default;
  static YamlNode null_node(YamlMark at = {});
  static YamlNode scalar_node(std::string text, YamlMark at = {});
  static YamlNode sequence_node(YamlMark at = {});
  static YamlNode map_node(YamlMark at = {});

  explicit operator bool() const { return d_ != nullptr; }
  /// false for an absent node
  bool is_null() const;
  bool is_scalar() const;
  bool is_sequence() const;
  bool is_map() const;
  /// A scalar's text; "" for anything else.
  const std::string& scalar() const;
  YamlMark mark() const;
  /// A sequence's items or a mapping's entries; 0 for anything else.
  std::size_t size() const;
  /// A mapping's value at `key` (the first entry of that key); absent if none or not a mapping.
  YamlNode operator[](std::string_view key) const;
  /// A sequence's item; absent past its end or if not a sequence.
  YamlNode operator[](std::size_t i) const;
  /// A mapping's entries in document order (empty for anything else).
  const std::vector<Entry>& entries() const;
  /// A sequence's items (empty for anything else).
  const std::vector<YamlNode>& items() const;

  // ---- building (a mapping or sequence this node is; the parser, the profilers' cluster mappings)
  /// Sets a mapping's `key` to `value`: its first entry of that key replaced, else one appended.
  void set(std::string_view key, YamlNode value);
  /// set(key, a scalar node of `text`)
  void set(std::string_view key, std::string text);
  /// The mapping at `key`, an empty one added first if the key is absent.
  YamlNode child_map(std::string_view key);
  /// Appends to a mapping (keys unchecked: the parser keeps duplicates for parse_yaml to refuse).
  void append(YamlNode key, YamlNode value);
  /// Appends an item to a sequence.
  void push_back(YamlNode item);
  /// A copy sharing nothing with this node (aliases in it copied as often as they occur).
  YamlNode deep_copy() const;

 private:
  struct Data;
  std::shared_ptr<Data> d_;
};

struct YamlNode::Entry {
  YamlNode key, value;
};

/// A syntax error: where (lines and columns from 0) and libyaml's words for it.
struct YamlSyntaxError : std::runtime_error {
  YamlSyntaxError(YamlMark at_, std::string problem_) : std::runtime_error(problem_), at(at_), problem(std::move(problem_)) {}
  YamlMark at;
  std::string problem;
};

/// Parses the first document of `text` with libyaml (YAML 1.1); throws YamlSyntaxError.
/// parse_yaml (common/config_reader.hpp) is what readers call: it adds the checks (duplicate keys,
/// keys that are not plain scalars, size). An empty document is a null node; plain (unquoted,
/// untagged) scalars "", "~", "null", "Null" and "NULL" are nulls; tags are not kept. Nested
/// deeper than limits::kMaxYamlDepth collections is a syntax error.
YamlNode parse_yaml_document(const std::string& text);

/// A scalar read as a number, as YAML 1.1 / yaml-cpp read it: the whole text a C++ stream reads
/// as a double (trailing spaces allowed), or .inf / -.inf / .nan in their three spellings; nullopt
/// otherwise ("1e", "0x10", "inf", "").
std::optional<double> yaml_to_double(const std::string& s);
/// A scalar read as a 64-bit integer, as a C++ stream with no base set reads it (0x1f hex, 017
/// octal; trailing spaces allowed); nullopt otherwise or past 64 bits.
std::optional<long long> yaml_to_integer(const std::string& s);
/// A scalar read as a YAML 1.1 boolean: y, yes, true, on (and n, no, false, off), all lower case,
/// all upper case or capitalised; nullopt otherwise.
std::optional<bool> yaml_to_bool(const std::string& s);

/// A scalar as YAML text that reads back as the same string: plain where that is safe (letters,
/// digits and _ . - + /, and not a null spelling), else yaml_quoted.
std::string yaml_scalar_text(const std::string& s);
/// A YAML double-quoted scalar: quote and backslash escaped, control characters as \xNN (a raw
/// newline inside quotes would read back as a space).
std::string yaml_quoted(const std::string& s);

/// A mapping written as configs/ writes it: nested mappings indented two spaces, scalars plain
/// where they read back as the same string (else double-quoted), lists of scalars in flow style
/// (`fused: [residual]`); an absent node writes nothing. Anything else (a list of lists or
/// mappings, a null) throws ConfigError naming `source` and the key path: it would not read back
/// the same.
std::string emit_yaml_mapping(const YamlNode& map, const std::string& source, int indent = 0, const std::string& path = "");

}  // namespace common
