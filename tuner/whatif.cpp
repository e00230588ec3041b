#include "tuner/whatif.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
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

double positive_number(const std::string& key, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(x > 0)) throw common::ConfigError("--sweep", key, fmt::format("expected a positive number, got '{}'", v));
  return x;
}

int positive_int(const std::string& key, const std::string& v) {
  const double x = positive_number(key, v);
  if (x != static_cast<double>(static_cast<int>(x))) throw common::ConfigError("--sweep", key, fmt::format("expected a positive integer, got '{}'", v));
  return static_cast<int>(x);
}

}  // namespace

void apply_setting(hardware::ClusterSpec& c, SearchSpace& s, const std::string& key, const std::string& v) {
  if (key == "nvlink_gb_per_s") c.node.nvlink_bytes_per_s = positive_number(key, v) * 1e9;
  else if (key == "nic_gbit_per_s") c.network.nic_bytes_per_s = positive_number(key, v) * 1e9 / 8.0;
  else if (key == "nics_per_node") c.network.nics_per_node = positive_int(key, v);
  else if (key == "latency_us") c.network.latency = Duration::from_us(positive_number(key, v));
  else if (key == "nodes") c.nodes = positive_int(key, v);
  else if (key == "hbm_gb") c.gpu.hbm_capacity_bytes = positive_number(key, v) * 1e9;
  else if (key == "seq_len") s.seq_len = positive_int(key, v);
  else if (key == "global_batch") s.global_batch = positive_int(key, v);
  else if (key == "cluster") {
    const int nodes = c.nodes;
    c = hardware::load_cluster(v);
    c.nodes = nodes;
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
    auto cost = hardware::make_analytic_cost_model(c);
    pt.result = search(model, c, *cost, s, options);
    out.push_back(std::move(pt));
  }
  return out;
}

namespace {

struct Row {
  std::string base_ms, base_tps, best_ms, best_tps, best_mfu, speedup, plan, base_plan;
  std::string best_mfu_fraction;  ///< CSV and JSON carry MFU as a fraction (0..1); tables show it in %
};

Row row_of(const SearchResult& r) {
  Row w{"-", "-", "-", "-", "-", "-", "no feasible plan", "-", "-"};
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
                                                                       {"tuned", "tokens/s"},
                                                                       {"tuned MFU", "%"},
                                                                       {"speedup", "x"},
                                                                       {"tuned plan", ""},
                                                                       {"baseline plan", ""}}) {
    header.push_back(h);
    units.push_back(u);
  }
  common::Table t(header, units);
  for (const auto& p : points) {
    std::vector<std::string> cells;
    for (const auto& [k, v] : p.settings) cells.push_back(v);
    const Row w = row_of(p.result);
    for (const auto& c : {w.base_ms, w.base_tps, w.best_ms, w.best_tps, w.best_mfu, w.speedup, w.plan, w.base_plan}) cells.push_back(c);
    t.row(cells);
  }
  return t.str();
}

std::string whatif_csv(const std::vector<WhatIfPoint>& points) {
  std::string out;
  if (!points.empty())
    for (const auto& [k, v] : points.front().settings) out += k + ",";
  out += "baseline_step_ms,baseline_tokens_per_s,tuned_step_ms,tuned_tokens_per_s,tuned_mfu,speedup,tuned_plan,baseline_plan,"
         "plans,infeasible,pruned,screened,search_s\n";
  for (const auto& p : points) {
    for (const auto& [k, v] : p.settings) out += v + ",";
    const Row w = row_of(p.result);
    const auto& r = p.result;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{:.3f}\n", w.base_ms, w.base_tps, w.best_ms, w.best_tps, w.best_mfu_fraction, w.speedup,
                       w.plan, w.base_plan, r.considered, r.infeasible, r.pruned, r.screened, r.seconds);
  }
  return out;
}

nlohmann::json whatif_json(const std::vector<WhatIfPoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : points) {
    nlohmann::json s = nlohmann::json::object();
    for (const auto& [k, v] : p.settings) s[k] = v;
    hardware::ClusterSpec dummy;
    auto r = search_json(p.result, dummy);
    r.erase("cluster");
    r.erase("nodes");
    r.erase("gpus");
    out.push_back({{"settings", s}, {"result", r}});
  }
  return out;
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
  if (ext == ".png") terminal = "pngcairo size 1000,620 enhanced font 'Sans,11'";
  else if (ext == ".svg") terminal = "svg size 1000,620 enhanced font 'Sans,11' background rgb 'white'";
  else throw common::ConfigError("--plot", "", fmt::format("'{}': expected a file name ending in .png or .svg", path));
  if (points.empty() || points.front().settings.empty()) throw common::ConfigError("--plot", "", "nothing to plot: no sweep");
  // x axis: the value of a single numeric key; otherwise one tick per point labelled key=value
  bool numeric = points.front().settings.size() == 1;
  for (const auto& p : points) {
    char* end = nullptr;
    std::strtod(p.settings[0].second.c_str(), &end);
    numeric &= end && *end == '\0';
  }
  const std::string key = points.front().settings.front().first;
  std::string xlabel = "sweep point";
  for (const auto& [k, what] : sweep_keys())
    if (k == key && numeric) xlabel = what;
  std::string data;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& r = points[i].result;
    std::string label;
    for (const auto& [k, v] : points[i].settings) label += (label.empty() ? "" : " ") + k + "=" + v;
    const std::string x = numeric ? points[i].settings[0].second : std::to_string(i);
    auto tps = [](const RankedPlan* p) { return p ? fmt::format("{:.6g}", p->report.tokens_per_s / 1e3) : std::string("NaN"); };
    data += fmt::format("{} {} {} \"{}\"\n", x, tps(r.baseline ? &*r.baseline : nullptr), tps(r.top.empty() ? nullptr : &r.top.front()), label);
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("slicetune-plot-{}", ::getpid());
  fs::create_directories(dir);
  const std::string dat = (dir / "whatif.dat").string(), gp = (dir / "whatif.gp").string();
  const std::string tmp_out = path + fmt::format(".tmp.{}{}", ::getpid(), ext);
  {
    std::ofstream(dat) << data;
    std::ofstream s(gp);
    s << "set terminal " << terminal << "\n"
      << "set output '" << tmp_out << "'\n"
      << "set title \"" << title << "\" noenhanced\n"
      << "set xlabel \"" << xlabel << "\" noenhanced\n"
      << "set ylabel 'throughput (thousand tokens/s, whole cluster)'\n"
      << "set grid\nset key bottom right box opaque\nset yrange [0:*]\n"
      << (numeric ? "set xtics noenhanced (" : "set xtics noenhanced rotate by -30 (");
    for (std::size_t i = 0; i < points.size(); ++i) {
      std::string label;
      for (const auto& [k, v] : points[i].settings) label += (label.empty() ? "" : " ") + (numeric ? v : k + "=" + v);
      s << (i ? ", " : "") << "\"" << label << "\" " << (numeric ? points[i].settings[0].second : std::to_string(i));
    }
    s << ")\n";
    if (numeric) {  // doublings (100, 200, 400, 800) read best on a log2 axis
      double lo = 1e300, hi = 0;
      for (const auto& p : points) {
        const double v = std::strtod(p.settings[0].second.c_str(), nullptr);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      if (hi >= 8 * lo) s << "set logscale x 2\nset xrange [" << lo / 1.15 << ":" << hi * 1.15 << "]\n";
    }
    if (!numeric) s << "set xrange [-0.5:" << points.size() - 0.5 << "]\n";
    s << "plot '" << dat << "' using 1:2 with linespoints lw 2 pt 7 title 'baseline: best Megatron plan (no overlap)', \\\n"
      << "     '" << dat << "' using 1:3 with linespoints lw 2 pt 5 title 'tuned: best plan (slicetune tune)'\n";
  }
  const std::string cmd = fmt::format("'{}' '{}' 2>'{}'", SLICETUNE_GNUPLOT, gp, (dir / "err.txt").string());
  const int rc = std::system(cmd.c_str());
  std::string err;
  {
    std::ifstream e(dir / "err.txt");
    std::getline(e, err, '\0');
  }
  fs::remove_all(dir);
  if (rc != 0 || !fs::exists(tmp_out) || fs::file_size(tmp_out) == 0) {
    std::error_code ec;
    fs::remove(tmp_out, ec);
    throw common::ConfigError("--plot", "", fmt::format("gnuplot failed drawing {}: {}", path, err));
  }
  fs::rename(tmp_out, path);
#endif
}

}  // namespace tuner
