// whatif --plot over two keys: one pair of lines per value of the second key (issue 16 papercut
// "a whatif grid over two keys draws one line across categories with the last label cut off").
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/config_reader.hpp"
#include "tuner/whatif.hpp"

namespace {

/// A point whose baseline and tuned plans run at `base` and `tuned` tokens/s.
tuner::WhatIfPoint point(std::vector<std::pair<std::string, std::string>> settings, double base, double tuned) {
  tuner::WhatIfPoint p{.settings = std::move(settings), .result = {}};
  tuner::RankedPlan b, t;
  b.report.tokens_per_s = base;
  t.report.tokens_per_s = tuned;
  p.result.baseline = b;
  p.result.top.push_back(t);
  return p;
}

/// The rows of gnuplot data block `index` (blocks are separated by two blank lines; '#' lines are comments).
std::vector<std::string> block(const std::string& data, int index) {
  std::vector<std::string> rows;
  std::istringstream in(data);
  int current = 0, blanks = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      if (++blanks == 2) ++current;
      continue;
    }
    blanks = 0;
    if (line[0] != '#' && current == index) rows.push_back(line);
  }
  return rows;
}

int count(const std::string& s, const std::string& part) {
  int n = 0;
  for (auto p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a sweep over two keys: x is the first key, one series per value of the second") {
  // 3 NIC speeds x 2 sequence lengths, in sweep order (the first key varies slowest): 6 points.
  std::vector<tuner::WhatIfPoint> pts;
  for (int nic : {100, 200, 400})
    for (int seq : {2048, 4096})
      pts.push_back(
          point({{"nic_gbit_per_s", std::to_string(nic)}, {"seq_len", std::to_string(seq)}}, nic * 10.0 + seq, nic * 20.0 + seq));
  const auto c = tuner::whatif_chart(pts, "gpt3-2.7b on dgx-h100", "out.svg", "d.dat");
  // expected: two series, named after the second key's values, each with the 3 NIC speeds as x
  REQUIRE(c.series == std::vector<std::string>{"seq_len=2048", "seq_len=4096"});
  // series 0 (seq 2048): x = 100, 200, 400; baseline nic*10+2048 and tuned nic*20+2048, in thousands
  CHECK(block(c.data, 0) == std::vector<std::string>{"100 3.048 4.048", "200 4.048 6.048", "400 6.048 10.048"});
  CHECK(block(c.data, 1) == std::vector<std::string>{"100 5.096 6.096", "200 6.096 8.096", "400 8.096 12.096"});
  // two lines per series (tuned, baseline), each reading its own block
  CHECK(count(c.script, "index 0 using") == 2);
  CHECK(count(c.script, "index 1 using") == 2);
  CHECK(count(c.script, "index 2 using") == 0);
  CHECK(c.script.find("title 'tuned, seq_len=4096'") != std::string::npos);
  CHECK(c.script.find("title 'baseline, seq_len=2048'") != std::string::npos);
  // the x axis is the first key, with a tick per value; 400/100 < 8: linear, 5 % margin either side so the last tick is inside
  CHECK(c.script.find("set xtics noenhanced ('100' 100, '200' 200, '400' 400)") != std::string::npos);
  CHECK(c.script.find("set xrange [85:415]") != std::string::npos);
  CHECK(c.script.find("set key outside right") != std::string::npos);  // the legend hides no point
}

TEST_CASE("a categorical first key gets one tick per value; a single key keeps one pair of lines") {
  std::vector<tuner::WhatIfPoint> pts{point({{"cluster", "dgx-a100"}}, 1000, 1500), point({{"cluster", "dgx-h100"}}, 2000, 2600)};
  const auto c = tuner::whatif_chart(pts, "t", "o.png", "d.dat");
  CHECK(c.series == std::vector<std::string>{""});
  CHECK(block(c.data, 0) == std::vector<std::string>{"0 1 1.5", "1 2 2.6"});
  CHECK(c.script.find("set xtics noenhanced ('dgx-a100' 0, 'dgx-h100' 1)") != std::string::npos);
  CHECK(c.script.find("set xrange [-0.5:1.5]") != std::string::npos);
  CHECK(count(c.script, " using ") == 2);
  CHECK(c.script.find("title 'tuned: best plan (slicetune tune)'") != std::string::npos);
}

TEST_CASE("user strings reach gnuplot only inside single quotes, quotes doubled") {
  // A title and output path with a quote and a gnuplot command after it: inside '...' gnuplot interprets nothing but ''.
  std::vector<tuner::WhatIfPoint> pts{point({{"nodes", "1"}}, 1, 2), point({{"nodes", "2"}}, 2, 4)};
  const auto c = tuner::whatif_chart(pts, "it's'; system 'touch /tmp/x", "/tmp/a'b.svg", "d.dat");
  CHECK(c.script.find("set title 'it''s''; system ''touch /tmp/x' noenhanced") != std::string::npos);
  CHECK(c.script.find("set output '/tmp/a''b.svg'") != std::string::npos);
  CHECK_THROWS_AS(tuner::whatif_chart({}, "t", "o.svg", "d"), common::ConfigError);
}

TEST_CASE("the drawn SVG has a legend entry per line") {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;  // no gnuplot: the script tests above still ran
  std::vector<tuner::WhatIfPoint> pts;
  for (int nodes : {1, 2, 4})
    for (int seq : {2048, 4096, 8192})
      pts.push_back(point({{"nodes", std::to_string(nodes)}, {"seq_len", std::to_string(seq)}}, nodes * 1e4, nodes * 1.3e4));
  const std::string svg =
      (std::filesystem::temp_directory_path() / ("slicetune-grid-" + std::to_string(::getpid()) + ".svg")).string();
  tuner::plot_whatif(pts, "grid", svg);
  std::ifstream in(svg);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::filesystem::remove(svg);
  // expected: 3 series x (tuned, baseline) = 6 legend titles
  for (const char* seq : {"2048", "4096", "8192"}) {
    CHECK(text.find(std::string("tuned, seq_len=") + seq) != std::string::npos);
    CHECK(text.find(std::string("baseline, seq_len=") + seq) != std::string::npos);
  }
}
