#include "common/config_reader.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "common/units.hpp"

namespace common {

bool parse_dtype(std::string_view s, DType& out) {
  if (s == "fp32") out = DType::fp32;
  else if (s == "bf16") out = DType::bf16;
  else if (s == "fp16") out = DType::fp16;
  else if (s == "fp8") out = DType::fp8;
  else return false;
  return true;
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source, "", fmt::format("malformed YAML at line {}, column {}: {}", e.mark.line + 1,
                                              e.mark.column + 1, e.msg));
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ConfigReader::ConfigReader(YAML::Node node, std::string source, std::string prefix)
    : node_(std::move(node)), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!node_.IsMap()) {
    throw ConfigError(source_, prefix_, "expected a mapping of key: value");
  }
}

void ConfigReader::fail(const std::string& key, const std::string& what) const {
  throw ConfigError(source_, path(key), what);
}

bool ConfigReader::has(const std::string& key) const { return static_cast<bool>(node_[key]); }

YAML::Node ConfigReader::scalar(const std::string& key) {
  YAML::Node n = node_[key];
  if (!n) fail(key, "missing (required)");
  if (!n.IsScalar()) fail(key, "expected a scalar value");
  used_.insert(key);
  return n;
}

std::string ConfigReader::str(const std::string& key) { return scalar(key).as<std::string>(); }

std::string ConfigReader::str_or(const std::string& key, const std::string& fallback) {
  return has(key) ? str(key) : fallback;
}

std::vector<std::string> ConfigReader::strings_or_empty(const std::string& key) {
  std::vector<std::string> out;
  if (!has(key)) return out;
  YAML::Node n = node_[key];
  if (!n.IsSequence()) fail(key, "expected a list such as [a, b]");
  used_.insert(key);
  for (const auto& item : n) {
    if (!item.IsScalar()) fail(key, "expected a list of names");
    out.push_back(item.as<std::string>());
  }
  return out;
}

double ConfigReader::number(const std::string& key) {
  auto n = scalar(key);
  try {
    return n.as<double>();
  } catch (const YAML::Exception&) {
    fail(key, fmt::format("expected a number, got '{}'", n.as<std::string>()));
  }
}

double ConfigReader::positive(const std::string& key) {
  double v = number(key);
  if (!(v > 0)) fail(key, fmt::format("expected a positive number, got {}", v));
  return v;
}

double ConfigReader::number_or(const std::string& key, double fallback) {
  return has(key) ? number(key) : fallback;
}

long long ConfigReader::integer(const std::string& key) {
  auto n = scalar(key);
  try {
    return n.as<long long>();
  } catch (const YAML::Exception&) {
    fail(key, fmt::format("expected an integer, got '{}'", n.as<std::string>()));
  }
}

long long ConfigReader::positive_integer(const std::string& key) {
  long long v = integer(key);
  if (v <= 0) fail(key, fmt::format("expected a positive integer, got {}", v));
  return v;
}

long long ConfigReader::integer_or(const std::string& key, long long fallback) {
  return has(key) ? integer(key) : fallback;
}

std::vector<long long> ConfigReader::positive_integer_list(const std::string& key) {
  YAML::Node n = node_[key];
  if (!n) fail(key, "missing (required)");
  if (!n.IsSequence()) fail(key, "expected a list of positive integers, e.g. [10, 11, 11, 10]");
  used_.insert(key);
  std::vector<long long> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string item = fmt::format("{}[{}]", key, i);
    if (!n[i].IsScalar()) fail(item, "expected a positive integer");
    long long v = 0;
    try {
      v = n[i].as<long long>();
    } catch (const YAML::Exception&) {
      fail(item, fmt::format("expected a positive integer, got '{}'", n[i].as<std::string>()));
    }
    if (v <= 0) fail(item, fmt::format("expected a positive integer, got {}", v));
    out.push_back(v);
  }
  return out;
}

bool ConfigReader::boolean(const std::string& key) {
  auto n = scalar(key);
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    fail(key, fmt::format("expected true or false, got '{}'", n.as<std::string>()));
  }
}

bool ConfigReader::boolean_or(const std::string& key, bool fallback) {
  return has(key) ? boolean(key) : fallback;
}

std::string ConfigReader::choice(const std::string& key, const std::vector<std::string>& choices) {
  std::string v = str(key);
  for (const auto& c : choices)
    if (c == v) return v;
  fail(key, fmt::format("expected one of {}, got '{}'", fmt::join(choices, " | "), v));
}

std::string ConfigReader::choice_or(const std::string& key, const std::vector<std::string>& choices,
                                    const std::string& fallback) {
  return has(key) ? choice(key, choices) : fallback;
}

bool ConfigReader::is_mapping(const std::string& key) const {
  const YAML::Node n = node_[key];
  return n && n.IsMap();
}

ConfigReader ConfigReader::child(const std::string& key) {
  YAML::Node n = node_[key];
  if (!n) fail(key, "missing (required section)");
  used_.insert(key);
  return ConfigReader(n, source_, path(key));
}

void ConfigReader::finish() const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    auto key = it->first.as<std::string>();
    if (!used_.count(key)) fail(key, "unknown key");
  }
}

}  // namespace common
