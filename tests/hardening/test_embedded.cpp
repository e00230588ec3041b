// Embedded configs: the text the readers parse (each YAML file line for line without its comments,
// cmake/embed_configs.cmake) is the same YAML as the file in configs/: the same tree, node for node,
// with the same line and column for every node (so errors point at the same place), and the file
// as written is kept for calibrate, which rewrites it.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "tests/hardening/process.hpp"

namespace {

/// Where the two trees first differ ("" when they do not).
std::string difference(const common::YamlNode& a, const common::YamlNode& b, const std::string& path) {
  if (static_cast<bool>(a) != static_cast<bool>(b) || a.is_null() != b.is_null() || a.is_scalar() != b.is_scalar() ||
      a.is_sequence() != b.is_sequence() || a.is_map() != b.is_map())
    return path + ": node type";
  if (a.mark().line != b.mark().line || a.mark().column != b.mark().column) return path + ": line or column";
  if (a.is_scalar()) return a.scalar() == b.scalar() ? "" : path + ": value '" + a.scalar() + "' vs '" + b.scalar() + "'";
  if (a.size() != b.size()) return path + ": size";
  if (a.is_sequence()) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (auto d = difference(a[i], b[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
  } else if (a.is_map()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const auto& ea = a.entries()[i];
      const auto& eb = b.entries()[i];
      if (auto d = difference(ea.key, eb.key, path + ".<key>"); !d.empty()) return d;
      if (auto d = difference(ea.value, eb.value, path + "." + ea.key.scalar()); !d.empty()) return d;
    }
  }
  return "";
}

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("every embedded YAML config parses, without its comments, to the file's own tree at the same lines and columns") {
  int yaml_files = 0;
  for (const auto& c : common::embedded_configs()) {
    const std::string key = c.key;
    CAPTURE(key);
    if (key.starts_with("hf/")) {  // JSON: embedded once
      CHECK(std::string(c.yaml) == c.text);
      continue;
    }
    ++yaml_files;
    const std::string file = hardening::slurp(std::string(SLICETUNE_SOURCE_DIR) + "/configs/" + key + ".yaml");
    REQUIRE(!file.empty());
    CHECK(std::string(c.text) == file);  // as written: what calibrate rewrites
    CHECK(lines(c.yaml) == lines(file));
    CHECK(difference(common::parse_yaml(file, key), common::parse_yaml(c.yaml, key), key) == "");
    // the comments are removed: most of the default cluster file's bytes (6,414 bytes, 1,341 without them)
    if (key == "clusters/dgx-h100") CHECK(std::string(c.yaml).size() < file.size() / 2);
  }
  CHECK(yaml_files >= 10);
}

TEST_CASE("resolve_config gives the readers the text without comments, and the file as written on request") {
  const auto parsed = common::resolve_config("clusters", "dgx-h100");
  const auto written = common::resolve_config("clusters", "dgx-h100", true);
  const std::string file = hardening::slurp(std::string(SLICETUNE_SOURCE_DIR) + "/configs/clusters/dgx-h100.yaml");
  CHECK(written.text == file);
  CHECK(parsed.text.find('#') == std::string::npos);  // its only '#' are comments
  CHECK(parsed.source == written.source);
  CHECK(parsed.source == "configs/clusters/dgx-h100.yaml (embedded)");
}
