// No user string reaches an interpreter: the what-if chart's gnuplot script is a fixed template.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/hardening/process.hpp"

using namespace hardening;

namespace {

bool have_gnuplot() {
  for (const char* p : {"/usr/bin/gnuplot", "/usr/local/bin/gnuplot"})
    if (std::filesystem::exists(p)) return true;
  return false;
}

/// tiny's shape (configs/models/tiny.yaml) under another name: whatif tunes it in well under a second.
std::string tiny_named(const std::string& yaml_name) {
  return "name: " + yaml_name +
         "\nlayers: 2\nhidden: 64\nheads: 4\nffn_hidden: 256\nvocab: 256\nseq_len: 32\nnorm: layernorm\nactivation: gelu\n"
         "position: learned\ntied_embeddings: true\n";
}

}  // namespace

TEST_CASE("whatif --plot: a model name with a quote, a newline and system \"...\" runs nothing and is drawn as text") {
  if (!have_gnuplot()) {
    MESSAGE("gnuplot not installed: skipped");
    return;
  }
  Scratch s;
  const std::string marker = s / "PWNED";
  // YAML double-quoted: the name is  x" <newline> system "touch MARKER" <newline> set output "ESCAPE  ; the old script
  // pasted it into `set title "..."`, so gnuplot ran the system command on the next line.
  write_text(s / "evil.yaml", tiny_named("\"x\\\" \\nsystem \\\"touch " + marker + "\\\"\\nset output \\\"" + (s / "escape") + "\\\"\\n#\""));
  const std::string png = s / "chart.png";
  const auto r = slicetune({"whatif", "--model", s / "evil.yaml", "--cluster", "cpu-host", "--dtype", "fp32", "--sweep", "nodes=1,2", "--plot", png}, 120);
  INFO(r.err);
  CHECK(r.code == 0);
  // expected: no file created by the injected command, and the chart at the path given
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK_FALSE(std::filesystem::exists(s / "escape"));
  REQUIRE(std::filesystem::exists(png));
  CHECK(slurp(png).substr(1, 3) == "PNG");  // PNG signature: \x89 P N G
}

TEST_CASE("whatif --plot: a model name with a single quote, a backquote, a macro and a newline runs nothing") {
  if (!have_gnuplot()) {
    MESSAGE("gnuplot not installed: skipped");
    return;
  }
  // The chart's script holds user strings in gnuplot single quotes (tuner::whatif_chart), where gnuplot
  // expands no `command` and no @macro and a quote is ''. The name tries to close the quote ('), to
  // run a backquoted command, and to start a new line (control characters become spaces).
  Scratch s;
  const std::string m1 = s / "PWNED1", m2 = s / "PWNED2";
  write_text(s / "evil.yaml", tiny_named("\"x' `touch " + m1 + "` @a \\nsystem('touch " + m2 + "')\\n#\""));
  const std::string svg = s / "chart.svg";
  const auto r = slicetune({"whatif", "--model", s / "evil.yaml", "--cluster", "cpu-host", "--dtype", "fp32", "--sweep", "nodes=1,2", "--plot", svg}, 120);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_FALSE(std::filesystem::exists(m1));
  CHECK_FALSE(std::filesystem::exists(m2));
  REQUIRE(std::filesystem::exists(svg));
  // the title is drawn as text, the backquotes in it
  CHECK(slurp(svg).find("`touch ") != std::string::npos);
}

TEST_CASE("whatif --by-layout --plot: the per-layout chart holds the same name as text and runs nothing") {
  if (!have_gnuplot()) {
    MESSAGE("gnuplot not installed: skipped");
    return;
  }
  // tuner::whatif_layout_chart writes its own plot lines; the title, labels and paths go through the
  // same gnuplot single quotes
  Scratch s;
  const std::string m1 = s / "PWNED1", m2 = s / "PWNED2";
  write_text(s / "evil.yaml", tiny_named("\"x' `touch " + m1 + "` @a \\nsystem('touch " + m2 + "')\\n#\""));
  const std::string svg = s / "chart.svg";
  const auto r = slicetune(
      {"whatif", "--model", s / "evil.yaml", "--cluster", "cpu-host", "--dtype", "fp32", "--sweep", "nodes=1,2", "--by-layout", "--plot", svg}, 120);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_FALSE(std::filesystem::exists(m1));
  CHECK_FALSE(std::filesystem::exists(m2));
  REQUIRE(std::filesystem::exists(svg));
  CHECK(slurp(svg).find("`touch ") != std::string::npos);
}

TEST_CASE("whatif --plot \"it's.svg\": a quote in the output path is a file name like any other") {
  if (!have_gnuplot()) {
    MESSAGE("gnuplot not installed: skipped");
    return;
  }
  Scratch s;
  const std::string svg = s / "it's.svg";
  const auto r = slicetune({"whatif", "--model", "tiny", "--cluster", "cpu-host", "--dtype", "fp32", "--sweep", "nodes=1,2", "--plot", svg}, 120);
  INFO(r.err);
  CHECK(r.code == 0);
  REQUIRE(std::filesystem::exists(svg));
  // the chart names both series (the fixed template's titles)
  const std::string text = slurp(svg);
  CHECK(text.find("<svg") != std::string::npos);
  CHECK(text.find("tuned: best plan") != std::string::npos);
  // nothing else was left in the folder (no temporary output next to the chart)
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(s.dir)) ++files;
  CHECK(files == 1);
}
