#include "tuner/whatif.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "common/limits.hpp"
#include "hardware/cost_model.hpp"
#include "sim/prediction_range.hpp"
#include "common/table.hpp"
#include "tuner/report.hpp"

namespace tuner {

const std::vector<std::pair<std::string, std::string>>& sweep_keys() {
  static const std::vector<std::pair<std::string, std::string>> k{
      {"nvlink_gb_per_s", "NVLink bandwidth per GPU (GB/s per direction; cluster node.nvlink_gb_per_s)"},
      {"nic_gbit_per_s", "bandwidth of one NIC (Gbit/s per direction; cluster network.nic_gbit_per_s)"},
      {"nics_per_node", "NICs per node (cluster network.nics_per_node)"},
      {"latency_us", "inter-node latency (us; cluster network.latency_us)"},
      {"nodes", "number of nodes"},
      {"cluster", "cluster (GPU type and fabric): a name from slicetune list or a YAML file"},
      {"hbm_gb", "GPU memory (GB; cluster gpu.hbm_gb)"},
      {"seq_len", "sequence length (tokens)"},
      {"global_batch", "sequences per step"}};
  return k;
}

SweepAxis parse_sweep(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    throw common::ConfigError("--sweep", "", fmt::format("expected KEY=V1,V2,... got '{}'", arg));
  SweepAxis a;
  a.key = arg.substr(0, eq);
  bool known = false;
  std::string keys;
  for (const auto& [k, what] : sweep_keys()) {
    known |= k == a.key;
    keys += (keys.empty() ? "" : " | ") + k;
  }
  if (!known) throw common::ConfigError("--sweep", a.key, "unknown key; expected one of " + keys);
  std::string rest = arg.substr(eq + 1);
  for (std::size_t p = 0; p <= rest.size();) {
    const auto c = std::min(rest.find(',', p), rest.size());
    const std::string v = rest.substr(p, c - p);
    if (v.empty()) throw common::ConfigError("--sweep", a.key, fmt::format("empty value in '{}'", rest));
    a.values.push_back(v);
    p = c + 1;
  }
  // check every value now, not after an hour of sweeping
  for (const auto& v : a.values) {
    hardware::ClusterSpec c;
    SearchSpace s;
    apply_setting(c, s, a.key, v);
  }
  return a;
}

namespace {

namespace lim = common::limits;

/// A finite number in (0, hi]; strtod accepts "inf", "nan" and "1e999", which are refused here.
double positive_number(const std::string& key, const std::string& v, double hi) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(x) || !(x > 0) || !(x <= hi))
    throw common::ConfigError("--sweep", key, fmt::format("expected a positive number up to {}, got '{}'", hi, v));
  return x;
}

int positive_int(const std::string& key, const std::string& v, std::int64_t hi) {
  const double x = positive_number(key, v, static_cast<double>(hi));
  if (x != std::floor(x)) throw common::ConfigError("--sweep", key, fmt::format("expected a positive integer up to {}, got '{}'", hi, v));
  return static_cast<int>(x);  // in (0, hi] and integral: the conversion is exact
}

}  // namespace

void apply_setting(hardware::ClusterSpec& c, SearchSpace& s, const std::string& key, const std::string& v) {
  if (key == "nvlink_gb_per_s") c.node.nvlink_bytes_per_s = positive_number(key, v, lim::kMaxGbPerS) * 1e9;
  else if (key == "nic_gbit_per_s") c.network.nic_bytes_per_s = positive_number(key, v, lim::kMaxGbPerS) * 1e9 / 8.0;
  else if (key == "nics_per_node") c.network.nics_per_node = positive_int(key, v, lim::kMaxNicsPerNode);
  else if (key == "latency_us") c.network.latency = Duration::from_us(positive_number(key, v, lim::kMaxMicroseconds));
  else if (key == "nodes") hardware::set_nodes(c, positive_int(key, v, lim::kMaxNodes), "--sweep nodes=" + v);
  else if (key == "hbm_gb") c.gpu.hbm_capacity_bytes = positive_number(key, v, lim::kMaxHbmGb) * 1e9;
  else if (key == "seq_len") s.seq_len = positive_int(key, v, lim::kMaxSeqLen);
  else if (key == "global_batch") s.global_batch = positive_int(key, v, lim::kMaxGlobalBatch);
  else if (key == "cluster") {
    const int nodes = c.nodes;
    c = hardware::load_cluster(v);
    hardware::set_nodes(c, nodes, "--sweep cluster=" + v);
  } else throw common::ConfigError("--sweep", key, "unknown key");
}

std::vector<WhatIfPoint> whatif(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const SearchSpace& space,
                                const std::vector<SweepAxis>& axes, const SearchOptions& options,
                                const std::function<void(std::size_t, std::size_t)>& progress) {
  std::size_t n = 1;
  for (const auto& a : axes) n *= a.values.size();
  std::vector<WhatIfPoint> out;
  for (std::size_t i = 0; i < n; ++i) {
    if (progress) progress(i, n);
    WhatIfPoint pt;
    std::size_t rest = i;
    std::vector<std::size_t> idx(axes.size());
    for (std::size_t a = axes.size(); a-- > 0;) {
      idx[a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
    hardware::ClusterSpec c = cluster;
    SearchSpace s = space;
    for (std::size_t a = 0; a < axes.size(); ++a)  // cluster first: it replaces everything else
      if (axes[a].key == "cluster") apply_setting(c, s, axes[a].key, axes[a].values[idx[a]]);
    for (std::size_t a = 0; a < axes.size(); ++a) {
      pt.settings.emplace_back(axes[a].key, axes[a].values[idx[a]]);
      if (axes[a].key != "cluster") apply_setting(c, s, axes[a].key, axes[a].values[idx[a]]);
    }
    auto cost = hardware::make_analytic_cost_model(c, s.stack);
    pt.result = search(model, c, *cost, s, options);
    pt.gpus_per_node = c.gpu.arch == hardware::GpuArch::cpu ? 0 : c.node.gpus_per_node;
    out.push_back(std::move(pt));
  }
  return out;
}

namespace {

struct Row {
  std::string base_ms, base_tps, best_ms, best_tps, best_mfu, speedup, plan, base_plan;
  std::string best_mfu_fraction = "-";  ///< CSV and JSON carry MFU as a fraction (0..1); tables show it in %
  std::string best_range = "-", distinct = "-";
};

Row row_of(const WhatIfPoint& p) {
  const SearchResult& r = p.result;
  Row w{"-", "-", "-", "-", "-", "-", "no feasible plan", "-"};
  if (r.baseline) {
    w.base_ms = fmt::format("{:.2f}", r.baseline->report.step_time.ms());
    w.base_tps = fmt::format("{:.0f}", r.baseline->report.tokens_per_s);
    w.base_plan = plan_label(r.baseline->plan);
  }
  if (!r.top.empty()) {
    const auto& b = r.top.front().report;
    w.best_ms = fmt::format("{:.2f}", b.step_time.ms());
    w.best_tps = fmt::format("{:.0f}", b.tokens_per_s);
    w.best_mfu = fmt::format("{:.1f}", 100 * b.mfu);
    w.best_mfu_fraction = fmt::format("{:.4f}", b.mfu);
    w.plan = plan_label(r.top.front().plan);
    if (r.baseline) w.speedup = fmt::format("{:.3f}", r.baseline->report.step_time.s() / b.step_time.s());
    if (p.gpus_per_node > 0) {
      // the out-of-sample bands are of analytic predictions on GPUs (sim::prediction_range)
      hardware::ClusterSpec c;
      c.node.gpus_per_node = p.gpus_per_node;
      const auto g = sim::prediction_range(r.top.front().plan, c, b.step_time);
      w.best_range = fmt::format("{:.0f} .. {:.0f}", g.low.ms(), g.high.ms());
      if (r.baseline && r.baseline->index != r.top.front().index)
        w.distinct = sim::overlaps(g, sim::prediction_range(r.baseline->plan, c, r.baseline->report.step_time)) ? "within error" : "beyond error";
    }
  }
  return w;
}

}  // namespace

std::string whatif_table(const std::vector<WhatIfPoint>& points) {
  std::vector<std::string> header, units;
  if (!points.empty())
    for (const auto& [k, v] : points.front().settings) {
      header.push_back(k);
      units.push_back("");
    }
  for (auto [h, u] : std::vector<std::pair<const char*, const char*>>{{"baseline step", "ms"},
                                                                       {"baseline", "tokens/s"},
                                                                       {"tuned step", "ms"},
                                                                       {"tuned range", "ms"},
                                                                       {"tuned", "tokens/s"},
                                                                       {"tuned MFU", "%"},
                                                                       {"speedup", "x"},
                                                                       {"vs baseline", ""},
                                                                       {"tuned plan", ""},
                                                                       {"baseline plan", ""}}) {
    header.push_back(h);
    units.push_back(u);
  }
  common::Table t(header, units);
  for (const auto& p : points) {
    std::vector<std::string> cells;
    for (const auto& [k, v] : p.settings) cells.push_back(v);
    const Row w = row_of(p);
    for (const auto& c : {w.base_ms, w.base_tps, w.best_ms, w.best_range, w.best_tps, w.best_mfu, w.speedup, w.distinct, w.plan, w.base_plan})
      cells.push_back(c);
    t.row(cells);
  }
  return t.str();
}

std::string whatif_csv(const std::vector<WhatIfPoint>& points) {
  std::string out;
  if (!points.empty())
    for (const auto& [k, v] : points.front().settings) out += k + ",";
  out += "baseline_step_ms,baseline_tokens_per_s,tuned_step_ms,tuned_range_ms,tuned_tokens_per_s,tuned_mfu,speedup,vs_baseline,tuned_plan,"
         "baseline_plan,plans,infeasible,pruned,screened,search_s\n";
  for (const auto& p : points) {
    for (const auto& [k, v] : p.settings) out += v + ",";
    const Row w = row_of(p);
    const auto& r = p.result;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f}\n", w.base_ms, w.base_tps, w.best_ms, w.best_range, w.best_tps,
                       w.best_mfu_fraction, w.speedup, w.distinct, w.plan, w.base_plan, r.considered, r.infeasible, r.pruned, r.screened, r.seconds);
  }
  return out;
}

nlohmann::json whatif_json(const std::vector<WhatIfPoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : points) {
    nlohmann::json s = nlohmann::json::object();
    for (const auto& [k, v] : p.settings) s[k] = v;
    hardware::ClusterSpec c;
    c.node.gpus_per_node = std::max(1, p.gpus_per_node);
    auto r = search_json(p.result, c, p.gpus_per_node > 0);
    r.erase("cluster");
    r.erase("nodes");
    r.erase("gpus");
    out.push_back({{"settings", s}, {"result", r}});
  }
  return out;
}

namespace {

/// Text gnuplot shows as-is: control characters (tabs and newlines would split the data file's
/// columns and rows) become spaces; in a data column a double quote would start a quoted field,
/// so it becomes two single quotes there.
std::string printable(const std::string& s, bool data_column) {
  std::string out;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += ' ';
    else if (c == '"' && data_column) out += "''";
    else out += c;
  }
  return out;
}

/// Runs `argv` without a shell (posix_spawn), stdout to /dev/null and stderr to `err_path`;
/// returns the exit status (-1 when it could not start or ended by a signal).
int run_program(const std::vector<std::string>& argv, const std::string& err_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// `s` as a gnuplot single-quoted string: gnuplot interprets nothing inside one (no backquote
/// command substitution, no macros, no escapes) except '' for a quote; control characters, which
/// could end the line and the string with it, become spaces (printable).
std::string gp_quote(const std::string& s) {
  std::string o = "'";
  for (char c : printable(s, false)) {
    o += c;
    if (c == '\'') o += '\'';
  }
  return o + "'";
}

/// A finite number as strtod reads it (not "inf", "nan" or "nan(...)"), so that x can be placed by value.
bool is_number(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0' && std::isfinite(v);
}

}  // namespace

WhatIfChart whatif_chart(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& output,
                         const std::string& data_path) {
  if (points.empty() || points.front().settings.empty()) throw common::ConfigError("--plot", "", "nothing to plot: no sweep");
  const auto& first = points.front().settings;
  for (const auto& p : points)
    if (p.settings.size() != first.size()) throw common::ConfigError("--plot", "", "the sweep points have different keys");
  WhatIfChart c;
  const std::string key = first.front().first;
  // x: the first key's values (numeric: placed by value; otherwise one tick per distinct value)
  std::vector<std::string> xs;
  bool numeric = true;
  for (const auto& p : points) {
    const std::string& v = p.settings.front().second;
    if (std::find(xs.begin(), xs.end(), v) == xs.end()) xs.push_back(v);
    numeric &= is_number(v);
  }
  // numeric x is written as the number strtod read (never the user's text), categorical x as its tick index
  auto x_of = [&](const std::string& v) {
    return numeric ? fmt::format("{}", std::strtod(v.c_str(), nullptr)) : std::to_string(std::find(xs.begin(), xs.end(), v) - xs.begin());
  };
  // one series per combination of the other keys' values, in sweep order
  for (const auto& p : points) {
    std::string label;
    for (std::size_t k = 1; k < p.settings.size(); ++k) label += (label.empty() ? "" : " ") + p.settings[k].first + "=" + p.settings[k].second;
    if (std::find(c.series.begin(), c.series.end(), label) == c.series.end()) c.series.push_back(label);
  }
  // data: one gnuplot index (block) per series, rows "x baseline tuned" in thousand tokens/s
  auto tps = [](const RankedPlan* p) { return p ? fmt::format("{:.6g}", p->report.tokens_per_s / 1e3) : std::string("NaN"); };
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    if (si) c.data += "\n\n";
    c.data += fmt::format("# series {}: {}\n", si, printable(c.series[si].empty() ? key : c.series[si], false));
    for (const auto& p : points) {
      std::string label;
      for (std::size_t k = 1; k < p.settings.size(); ++k) label += (label.empty() ? "" : " ") + p.settings[k].first + "=" + p.settings[k].second;
      if (label != c.series[si]) continue;
      const auto& r = p.result;
      c.data += fmt::format("{} {} {}\n", x_of(p.settings.front().second), tps(r.baseline ? &*r.baseline : nullptr),
                            tps(r.top.empty() ? nullptr : &r.top.front()));
    }
  }
  std::string xlabel = key;
  for (const auto& [k, what] : sweep_keys())
    if (k == key) xlabel = what;
  std::size_t longest = 0;
  for (const auto& x : xs) longest = std::max(longest, x.size());
  const bool rotate = !numeric && longest > 10;
  std::string& s = c.script;
  s += "set output " + gp_quote(output) + "\n";
  s += "set title " + gp_quote(title) + " noenhanced\n";
  s += "set xlabel " + gp_quote(xlabel) + " noenhanced\n";
  s += "set ylabel 'throughput (thousand tokens/s, whole cluster)'\n";
  s += "set grid\nset yrange [0:*]\n";
  // several series: the legend right of the plot (short titles; the chart's title says what tuned and baseline are), so it
  // hides no point; one series: inside, with a right margin so that no tick label is cut off
  const bool grid = c.series.size() > 1;
  s += grid ? "set key outside right top box noenhanced\n" : "set key bottom right box opaque noenhanced\nset rmargin 6\n";
  if (rotate) s += "set bmargin 6\n";
  s += std::string("set xtics noenhanced") + (rotate ? " rotate by -30" : "") + " (";
  for (std::size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + gp_quote(xs[i]) + " " + x_of(xs[i]);
  s += ")\n";
  if (numeric) {  // doublings (100, 200, 400, 800) read best on a log2 axis; a margin either side keeps end labels inside
    double lo = 1e300, hi = 0;
    for (const auto& x : xs) {
      const double v = std::strtod(x.c_str(), nullptr);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (lo > 0 && hi >= 8 * lo) s += fmt::format("set logscale x 2\nset xrange [{:.6g}:{:.6g}]\n", lo / 1.15, hi * 1.15);
    else if (hi > lo) s += fmt::format("set xrange [{:.6g}:{:.6g}]\n", lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05);
  } else {
    s += fmt::format("set xrange [-0.5:{}]\n", xs.size() - 0.5);
  }
  // per series: tuned solid, baseline dashed, same colour
  s += "plot ";
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    const std::string tuned = grid ? "tuned, " + c.series[si] : "tuned: best plan (slicetune tune)";
    const std::string base = grid ? "baseline, " + c.series[si] : "baseline: best Megatron plan (no overlap)";
    s += fmt::format("{}{} index {} using 1:3 with linespoints lw 2 pt 5 lc {} title {}, \\\n", si ? "     " : "", gp_quote(data_path), si,
                     si + 1, gp_quote(tuned));
    s += fmt::format("     {} index {} using 1:2 with linespoints lw 2 dt 2 pt 7 lc {} title {}{}\n", gp_quote(data_path), si, si + 1,
                     gp_quote(base), si + 1 < c.series.size() ? ", \\" : "");
  }
  return c;
}

void plot_whatif(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& path) {
#ifndef SLICETUNE_GNUPLOT
  (void)points;
  (void)title;
  throw common::ConfigError("--plot", "", fmt::format("gnuplot was not found when slicetune was built; cannot draw {} (the CSV has the data)", path));
#else
  namespace fs = std::filesystem;
  const std::string ext = fs::path(path).extension().string();
  std::string terminal;
  if (ext == ".png") terminal = "pngcairo size 1100,620 noenhanced font 'Sans,11'";
  else if (ext == ".svg") terminal = "svg size 1100,620 noenhanced font 'Sans,11' background rgb 'white'";
  else throw common::ConfigError("--plot", "", fmt::format("'{}': expected a file name ending in .png or .svg", path));
  bool any = false;
  for (const auto& p : points) any |= p.result.baseline.has_value() || !p.result.top.empty();
  if (!points.empty() && !any)
    throw common::ConfigError("--plot", "", fmt::format("nothing to draw in {}: no point of the sweep has a feasible plan", path));

  // a private folder (mkdtemp: mode 0700, unpredictable name) for the script, data, output and errors;
  // the user's path never reaches gnuplot: the chart is drawn there and copied to `path` atomically
  std::string dir_template = (fs::temp_directory_path() / "slicetune-plot-XXXXXX").string();
  if (!::mkdtemp(dir_template.data())) throw common::ConfigError("--plot", "", fmt::format("cannot create a temporary folder: {}", std::strerror(errno)));
  const fs::path dir = dir_template;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string dat = (dir / "whatif.dat").string(), gp = (dir / "whatif.gp").string(), out = (dir / ("chart" + ext)).string(),
                    err_path = (dir / "err.txt").string();
  const WhatIfChart chart = whatif_chart(points, title, out, dat);
  std::ofstream(dat, std::ios::binary) << chart.data;
  std::ofstream(gp, std::ios::binary) << "set terminal " << terminal << "\n" << chart.script;
  // no shell: gnuplot is started directly with the script's path; user strings are in the script only
  // inside gnuplot single quotes (gp_quote)
  const int rc = run_program({SLICETUNE_GNUPLOT, gp}, err_path);
  std::string err;
  {
    std::ifstream e(err_path);
    std::getline(e, err, '\0');
  }
  std::error_code ec;
  if (rc != 0 || !fs::is_regular_file(out, ec) || fs::file_size(out, ec) == 0)
    throw common::ConfigError("--plot", "", fmt::format("gnuplot failed drawing {} (exit {}): {}", path, rc, printable(err, false)));
  common::write_file_atomically(path, common::read_text_file(out));
#endif
}

}  // namespace tuner
