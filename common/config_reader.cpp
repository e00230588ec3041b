#include "common/config_reader.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "common/limits.hpp"
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

namespace {

/// "line 3, column 5" of a node (libyaml counts from 0).
std::string where(const YamlNode& n) {
  const YamlMark m = n.mark();
  if (m.is_null()) return "";
  return fmt::format(" (line {}, column {})", m.line + 1, m.column + 1);
}

/// A node's key path, spelt out only when an error names it: the parent's path and this node's key
/// (in a mapping) or index (in a list); the root's path is "".
struct TreePath {
  const TreePath* parent = nullptr;
  const std::string* key = nullptr;
  std::size_t index = 0;
  std::string str() const {
    if (!parent) return "";
    const std::string p = parent->str();
    if (key) return p.empty() ? *key : p + "." + *key;
    return fmt::format("{}[{}]", p, index);
  }
};

/// Refuses what ConfigReader would silently misread: duplicate keys (a lookup finds the first),
/// keys that are not plain scalars, and documents that expand (through aliases) past
/// limits::kMaxYamlNodes nodes.
void check_tree(const YamlNode& n, const std::string& source, const TreePath& path, std::int64_t& budget) {
  if (--budget < 0)
    throw ConfigError(source, path.str(), fmt::format("more than {} YAML nodes (aliases expanded); not a slicetune file", limits::kMaxYamlNodes));
  if (n.is_sequence()) {
    std::size_t i = 0;
    for (const auto& item : n.items()) check_tree(item, source, TreePath{.parent = &path, .key = nullptr, .index = i++}, budget);
  } else if (n.is_map()) {
    std::unordered_set<std::string_view> seen;  // views of the keys' own text, which the document holds
    for (const auto& [key, value] : n.entries()) {
      if (!key.is_scalar())
        throw ConfigError(source, path.str(), fmt::format("a key{} is not a plain name (a {} used as a key)", where(key),
                                                          key.is_map() ? "mapping" : key.is_sequence() ? "list" : "null"));
      const TreePath child{.parent = &path, .key = &key.scalar(), .index = 0};
      if (!seen.insert(key.scalar()).second) throw ConfigError(source, child.str(), fmt::format("duplicate key{}", where(key)));
      check_tree(value, source, child, budget);
    }
  }
}

}  // namespace

YamlNode parse_yaml(const std::string& text, const std::string& source) {
  YamlNode root;
  try {
    root = parse_yaml_document(text);
  } catch (const YamlSyntaxError& e) {
    throw ConfigError(source, "", fmt::format("malformed YAML at line {}, column {}: {}", e.at.line + 1, e.at.column + 1, e.problem));
  }
  std::int64_t budget = limits::kMaxYamlNodes;
  check_tree(root, source, TreePath{}, budget);
  return root;
}

std::string read_text_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below like any other
  // non-regular file (/dev/zero, a folder, a socket).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw ConfigError(path, "", fmt::format("cannot open file: {}", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw ConfigError(path, "", fmt::format("cannot read file: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw ConfigError(path, "", fmt::format("not a regular file ({}); only regular files are read",
                                            S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO"
                                            : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket or special file"));
  auto too_big = [&](std::int64_t bytes) {
    return ConfigError(path, "", fmt::format("{} bytes is more than the {} MiB an input file may have", bytes,
                                             limits::kMaxInputFileBytes >> 20));
  };
  if (st.st_size > limits::kMaxInputFileBytes) throw too_big(st.st_size);
  std::string out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ConfigError(path, "", fmt::format("cannot read file: {}", std::strerror(errno)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (static_cast<std::int64_t>(out.size()) > limits::kMaxInputFileBytes) throw too_big(static_cast<std::int64_t>(out.size()));
  }
  return out;
}

ConfigReader::ConfigReader(YamlNode node, std::string source, std::string prefix)
    : node_(std::move(node)), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!node_.is_map()) {
    throw ConfigError(source_, prefix_, "expected a mapping of key: value");
  }
}

void ConfigReader::fail(const std::string& key, const std::string& what) const {
  throw ConfigError(source_, path(key), what);
}

bool ConfigReader::has(const std::string& key) const { return static_cast<bool>(node_[key]); }

YamlNode ConfigReader::scalar(const std::string& key) {
  YamlNode n = node_[key];
  if (!n) fail(key, "missing (required)");
  if (!n.is_scalar()) fail(key, "expected a scalar value");
  used_.insert(key);
  return n;
}

std::string ConfigReader::str(const std::string& key) { return scalar(key).scalar(); }

std::string ConfigReader::str_or(const std::string& key, const std::string& fallback) {
  return has(key) ? str(key) : fallback;
}

std::vector<std::string> ConfigReader::strings_or_empty(const std::string& key) {
  std::vector<std::string> out;
  if (!has(key)) return out;
  const YamlNode n = node_[key];
  if (!n.is_sequence()) fail(key, "expected a list such as [a, b]");
  used_.insert(key);
  for (const auto& item : n.items()) {
    if (!item.is_scalar()) fail(key, "expected a list of names");
    out.push_back(item.scalar());
  }
  return out;
}

double ConfigReader::number(const std::string& key) {
  const auto n = scalar(key);
  const auto v = yaml_to_double(n.scalar());
  if (!v) fail(key, fmt::format("expected a number, got '{}'", n.scalar()));
  if (!std::isfinite(*v)) fail(key, fmt::format("expected a finite number, got '{}'", n.scalar()));
  return *v;
}

double ConfigReader::number_in(const std::string& key, double lo, double hi) {
  const double v = number(key);
  if (!(v >= lo && v <= hi)) fail(key, fmt::format("expected a number in [{}, {}], got {}", lo, hi, v));
  return v;
}

double ConfigReader::positive(const std::string& key, double hi) {
  const double v = number(key);
  if (!(v > 0 && v <= hi)) fail(key, fmt::format("expected a positive number up to {}, got {}", hi, v));
  return v;
}

double ConfigReader::fraction(const std::string& key) {
  const double v = number(key);
  if (!(v > 0 && v <= 1)) fail(key, fmt::format("expected a fraction in (0, 1], got {}", v));
  return v;
}

double ConfigReader::number_or(const std::string& key, double fallback) {
  return has(key) ? number(key) : fallback;
}

long long ConfigReader::integer(const std::string& key) {
  const auto n = scalar(key);
  const auto v = yaml_to_integer(n.scalar());
  if (!v) fail(key, fmt::format("expected an integer (at most 19 digits), got '{}'", n.scalar()));
  return *v;
}

long long ConfigReader::integer_in(const std::string& key, long long lo, long long hi) {
  const long long v = integer(key);
  if (v < lo || v > hi) fail(key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
  return v;
}

int ConfigReader::int_in(const std::string& key, int lo, int hi) { return static_cast<int>(integer_in(key, lo, hi)); }

long long ConfigReader::positive_integer(const std::string& key, long long hi) { return integer_in(key, 1, hi); }

long long ConfigReader::integer_or(const std::string& key, long long fallback) {
  return has(key) ? integer(key) : fallback;
}

std::vector<long long> ConfigReader::positive_integer_list(const std::string& key) {
  const YamlNode n = node_[key];
  if (!n) fail(key, "missing (required)");
  if (!n.is_sequence()) fail(key, "expected a list of positive integers, e.g. [10, 11, 11, 10]");
  used_.insert(key);
  std::vector<long long> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string item = fmt::format("{}[{}]", key, i);
    if (!n[i].is_scalar()) fail(item, "expected a positive integer");
    const auto v = yaml_to_integer(n[i].scalar());
    if (!v) fail(item, fmt::format("expected a positive integer, got '{}'", n[i].scalar()));
    if (*v <= 0) fail(item, fmt::format("expected a positive integer, got {}", *v));
    out.push_back(*v);
  }
  return out;
}

bool ConfigReader::boolean(const std::string& key) {
  const auto n = scalar(key);
  const auto v = yaml_to_bool(n.scalar());
  if (!v) fail(key, fmt::format("expected true or false, got '{}'", n.scalar()));
  return *v;
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

bool ConfigReader::is_mapping(const std::string& key) const { return node_[key].is_map(); }

ConfigReader ConfigReader::child(const std::string& key) {
  YamlNode n = node_[key];
  if (!n) fail(key, "missing (required section)");
  used_.insert(key);
  return ConfigReader(n, source_, path(key));
}

void ConfigReader::finish() const {
  for (const auto& [k, v] : node_.entries()) {
    if (!k.is_scalar()) fail("", "a key is not a plain name");
    if (!used_.count(k.scalar())) fail(k.scalar(), "unknown key");
  }
}

}  // namespace common
