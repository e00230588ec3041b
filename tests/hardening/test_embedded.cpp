// Embedded configs: the text the readers parse (each YAML file line for line without its comments,
// cmake/embed_configs.cmake) is the same YAML as the file in configs/: the same tree, node for node,
// with the same line and column for every node (so errors point at the same place), and the file
// as written is kept for calibrate, which rewrites it.
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>

#include "common/embedded_configs.hpp"
#include "tests/hardening/process.hpp"

namespace {

/// Where the two trees first differ ("" when they do not).
std::string difference(const YAML::Node& a, const YAML::Node& b, const std::string& path) {
  if (a.Type() != b.Type()) return path + ": node type";
  if (a.Mark().line != b.Mark().line || a.Mark().column != b.Mark().column) return path + ": line or column";
  if (a.Tag() != b.Tag()) return path + ": tag";
  if (a.IsScalar()) return a.Scalar() == b.Scalar() ? "" : path + ": value '" + a.Scalar() + "' vs '" + b.Scalar() + "'";
  if (a.size() != b.size()) return path + ": size";
  if (a.IsSequence()) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (auto d = difference(a[i], b[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
  } else if (a.IsMap()) {
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
      if (auto d = difference(ia->first, ib->first, path + ".<key>"); !d.empty()) return d;
      if (auto d = difference(ia->second, ib->second, path + "." + ia->first.Scalar()); !d.empty()) return d;
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
    CHECK(difference(YAML::Load(file), YAML::Load(c.yaml), key) == "");
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
