#include "tuner/whatif.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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
#include "sim/report_json.hpp"
#include "sim/strategy.hpp"
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
      {"global_batch", "sequences per step"},
      {"global_batch_per_gpu", "sequences per step per GPU: global batch = this x the point's GPUs (weak scaling)"}};
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
  else if (key == "global_batch_per_gpu") {
    const std::int64_t per_gpu = positive_int(key, v, lim::kMaxGlobalBatch), gpus = c.total_gpus();
    if (per_gpu * gpus > lim::kMaxGlobalBatch)
      throw common::ConfigError("--sweep", key, fmt::format("{} sequences per GPU x {} GPUs = {} sequences per step, more than {}", per_gpu, gpus,
                                                             per_gpu * gpus, lim::kMaxGlobalBatch));
    s.global_batch = static_cast<int>(per_gpu * gpus);
  }
  else if (key == "cluster") {
    const int nodes = c.nodes;
    c = hardware::load_cluster(v);
    hardware::set_nodes(c, nodes, "--sweep cluster=" + v);
  } else throw common::ConfigError("--sweep", key, "unknown key");
}

std::vector<WhatIfPoint> whatif(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const SearchSpace& space,
                                const std::vector<SweepAxis>& axes, const SearchOptions& options,
                                const std::function<void(std::size_t, std::size_t)>& progress) {
  bool per_gpu = false, batch = false;
  for (const auto& a : axes) {
    per_gpu |= a.key == "global_batch_per_gpu";
    batch |= a.key == "global_batch";
  }
  if (per_gpu && batch)
    throw common::ConfigError("--sweep", "global_batch_per_gpu", "sets each point's global batch; sweep it or global_batch, not both");
  if (per_gpu && space.global_batch > 0)
    throw common::ConfigError("--sweep", "global_batch_per_gpu",
                              fmt::format("sets each point's global batch, but --global-batch {} was given too; drop one", space.global_batch));
  std::size_t n = 1;
  for (const auto& a : axes) n *= a.values.size();
  // every point's cluster and space first: a setting that fails only in combination (a per-GPU
  // batch times many nodes over the limit) is refused before the first point is tuned, not after
  struct Setup {
    hardware::ClusterSpec c;
    SearchSpace s;
    std::vector<std::pair<std::string, std::string>> settings;
  };
  std::vector<Setup> setups;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t rest = i;
    std::vector<std::size_t> idx(axes.size());
    for (std::size_t a = axes.size(); a-- > 0;) {
      idx[a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
    Setup u{cluster, space, {}};
    // cluster first (it replaces everything else), the per-GPU batch last (it counts the point's GPUs)
    auto rank = [](const std::string& key) { return key == "cluster" ? 0 : key == "global_batch_per_gpu" ? 2 : 1; };
    for (int r = 0; r < 3; ++r)
      for (std::size_t a = 0; a < axes.size(); ++a)
        if (rank(axes[a].key) == r) apply_setting(u.c, u.s, axes[a].key, axes[a].values[idx[a]]);
    for (std::size_t a = 0; a < axes.size(); ++a) u.settings.emplace_back(axes[a].key, axes[a].values[idx[a]]);
    setups.push_back(std::move(u));
  }
  std::vector<WhatIfPoint> out;
  for (std::size_t i = 0; i < n; ++i) {
    if (progress) progress(i, n);
    const auto& [c, s, settings] = setups[i];
    WhatIfPoint pt;
    pt.settings = settings;
    auto cost = hardware::make_analytic_cost_model(c, s.stack);
    pt.result = search(model, c, *cost, s, options);
    pt.gpus_per_node = c.gpu.arch == hardware::GpuArch::cpu ? 0 : c.node.gpus_per_node;
    pt.gpus = c.total_gpus();
    pt.global_batch = s.global_batch > 0 ? s.global_batch : default_global_batch(c);
    pt.tp_layouts = s.tp_layouts;
    out.push_back(std::move(pt));
  }
  return out;
}

namespace {

/// A CSV field (RFC 4180): quoted when it holds a comma, quote or line break - a grid plan's label
/// ("tp2d[2,2] dp2 ...") has commas.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string o = "\"";
  for (char c : v) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

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
    for (const auto& [k, v] : p.settings) out += csv_field(v) + ",";
    const Row w = row_of(p);
    const auto& r = p.result;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f}\n", w.base_ms, w.base_tps, w.best_ms, w.best_range, w.best_tps,
                       w.best_mfu_fraction, w.speedup, w.distinct, csv_field(w.plan), csv_field(w.base_plan), r.considered, r.infeasible, r.pruned, r.screened, r.seconds);
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
    nlohmann::json layouts = nlohmann::json::array(), winners = nlohmann::json::array();
    const auto rows = layout_bests(p);
    const RankedPlan* base = p.result.baseline ? &*p.result.baseline : nullptr;
    for (const auto& l : rows) {
      nlohmann::json j = {{"name", l.name}, {"tp_layout", sim::to_string(l.layout)}, {"searched", l.searched}, {"best", nullptr}};
      if (l.best) {
        const auto& rep = l.best->report;
        j["best"] = {{"describe", plan_label(l.best->plan)},
                     {"strategy", l.best->plan.strategy->name},
                     {"plan", sim::plan_json(l.best->plan)},
                     {"step_time_ms", rep.step_time.ms()},
                     {"tokens_per_s", rep.tokens_per_s},
                     {"mfu", rep.mfu},
                     {"memory_gb", rep.memory.total() / 1e9},
                     {"speedup_vs_megatron", base ? nlohmann::json(base->report.step_time.s() / rep.step_time.s()) : nlohmann::json(nullptr)}};
      }
      layouts.push_back(std::move(j));
    }
    for (std::size_t w : layout_winners(rows)) winners.push_back(rows[w].name);
    out.push_back({{"settings", s}, {"gpus", p.gpus}, {"global_batch", p.global_batch}, {"layouts", layouts}, {"winners", winners}, {"result", r}});
  }
  return out;
}

std::vector<LayoutBest> layout_bests(const WhatIfPoint& p) {
  const SearchResult& r = p.result;
  auto searched = [&](sim::TpLayout l) {
    return p.tp_layouts.empty() || std::find(p.tp_layouts.begin(), p.tp_layouts.end(), l) != p.tp_layouts.end();
  };
  std::vector<LayoutBest> rows{{"1d", sim::TpLayout::one_d, searched(sim::TpLayout::one_d), nullptr},
                               {"1d megatron", sim::TpLayout::one_d, searched(sim::TpLayout::one_d), nullptr},
                               {"2d", sim::TpLayout::two_d, searched(sim::TpLayout::two_d), nullptr},
                               {"2.5d", sim::TpLayout::two_five_d, searched(sim::TpLayout::two_five_d), nullptr}};
  // per_strategy is fastest first: the first entry of a layout is its best (1D: of any strategy)
  for (const auto& b : r.per_strategy) {
    LayoutBest& row = b.plan.tp_layout == sim::TpLayout::one_d ? rows[0] : b.plan.tp_layout == sim::TpLayout::two_d ? rows[2] : rows[3];
    if (!row.best) row.best = &b;
  }
  if (r.baseline) rows[1].best = &*r.baseline;
  return rows;
}

std::vector<std::size_t> layout_winners(const std::vector<LayoutBest>& rows) {
  std::vector<std::size_t> w;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].best || rows[i].name == "1d megatron") continue;  // one of the 1d plans: never a layout of its own
    if (w.empty() || rows[i].best->report.step_time < rows[w.front()].best->report.step_time) w = {i};
    else if (rows[i].best->report.step_time == rows[w.front()].best->report.step_time) w.push_back(i);
  }
  return w;
}

std::string scaling_of(const std::vector<WhatIfPoint>& points) {
  if (points.empty()) return "";
  bool gpus_vary = false, same_batch = true, same_per_gpu = true;
  for (const auto& p : points) {
    const auto& f = points.front();
    gpus_vary |= p.gpus != f.gpus;
    same_batch &= p.global_batch == f.global_batch;
    // global_batch / gpus equal without division: a x d == b x c
    same_per_gpu &= p.gpus > 0 && static_cast<std::int64_t>(p.global_batch) * f.gpus == static_cast<std::int64_t>(f.global_batch) * p.gpus;
  }
  if (!gpus_vary) return "";
  if (same_batch) return fmt::format("strong scaling: global batch {}", points.front().global_batch);
  if (same_per_gpu) {
    const double per_gpu = static_cast<double>(points.front().global_batch) / points.front().gpus;
    return fmt::format("weak scaling: {:g} sequence{} per GPU", per_gpu, per_gpu == 1 ? "" : "s");
  }
  return "";
}

namespace {

/// The cells of one layout's row: step time, range, tokens/s, MFU (%), memory, speedup over 1d megatron, plan.
struct LayoutCells {
  std::string ms = "-", range = "-", tps = "-", mfu = "-", mfu_fraction = "-", memory = "-", speedup = "-", plan, strategy = "-";
};

LayoutCells layout_cells(const WhatIfPoint& p, const LayoutBest& l) {
  LayoutCells c;
  if (!l.best) {
    c.plan = l.searched ? "no feasible plan" : "not searched (--tp-layouts)";
    return c;
  }
  const auto& rep = l.best->report;
  c.ms = fmt::format("{:.2f}", rep.step_time.ms());
  c.tps = fmt::format("{:.0f}", rep.tokens_per_s);
  c.mfu = fmt::format("{:.1f}", 100 * rep.mfu);
  c.mfu_fraction = fmt::format("{:.4f}", rep.mfu);
  c.memory = fmt::format("{:.1f}", rep.memory.total() / 1e9);
  c.plan = plan_label(l.best->plan);
  c.strategy = std::string(l.best->plan.strategy->name);
  if (p.result.baseline) c.speedup = fmt::format("{:.3f}", p.result.baseline->report.step_time.s() / rep.step_time.s());
  if (p.gpus_per_node > 0) {
    hardware::ClusterSpec cl;
    cl.node.gpus_per_node = p.gpus_per_node;
    const auto g = sim::prediction_range(l.best->plan, cl, rep.step_time);
    c.range = fmt::format("{:.0f} .. {:.0f}", g.low.ms(), g.high.ms());
  }
  return c;
}

/// "1d (async-tp)": a 1D row names the strategy of its plan ("megatron" for none, as describe() does)
std::string layout_label(const LayoutBest& l) {
  if (l.name != "1d" || !l.best) return l.name;
  return fmt::format("1d ({})", l.best->plan.strategy->baseline ? std::string("megatron") : std::string(l.best->plan.strategy->name));
}

/// One line on who wins the point and by how much over the fastest other layout.
std::string winner_line(const WhatIfPoint& p) {
  std::string where;
  for (const auto& [k, v] : p.settings) where += (where.empty() ? "" : ", ") + k + "=" + v;
  where += fmt::format(" ({} GPUs, global batch {})", p.gpus, p.global_batch);
  const auto rows = layout_bests(p);
  const auto w = layout_winners(rows);
  if (w.empty()) return where + ": no layout has a feasible plan";
  std::string names;
  for (std::size_t i : w) names += (names.empty() ? "" : " and ") + layout_label(rows[i]);
  std::string head = where + ": " + names + (w.size() > 1 ? " tie (the same step time)" : " wins");
  // the fastest layout that does not win
  const LayoutBest* next = nullptr;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].best && rows[i].name != "1d megatron" && std::find(w.begin(), w.end(), i) == w.end() &&
        (!next || rows[i].best->report.step_time < next->best->report.step_time))
      next = &rows[i];
  if (!next) return head + ", no other layout has a feasible plan";
  const auto& wr = rows[w.front()].best->report;
  const auto& nr = next->best->report;
  return head + fmt::format(", {:.3f}x faster than {} ({:.2f} vs {:.2f} ms per step)", nr.step_time.s() / wr.step_time.s(), layout_label(*next),
                            wr.step_time.ms(), nr.step_time.ms());
}

}  // namespace

std::string whatif_layout_table(const std::vector<WhatIfPoint>& points) {
  std::vector<std::string> header, units;
  if (!points.empty())
    for (const auto& [k, v] : points.front().settings) {
      header.push_back(k);
      units.push_back("");
    }
  for (auto [h, u] : std::vector<std::pair<const char*, const char*>>{{"GPUs", ""},
                                                                       {"global batch", "sequences"},
                                                                       {"layout", ""},
                                                                       {"wins", ""},
                                                                       {"step time", "ms"},
                                                                       {"range", "ms"},
                                                                       {"throughput", "tokens/s"},
                                                                       {"MFU", "%"},
                                                                       {"memory", "GB/GPU"},
                                                                       {"speedup", "x megatron"},
                                                                       {"best plan", ""}}) {
    header.push_back(h);
    units.push_back(u);
  }
  common::Table t(header, units);
  std::string lines;
  for (const auto& p : points) {
    const auto rows = layout_bests(p);
    const auto w = layout_winners(rows);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::vector<std::string> cells;
      // the point's settings on its first row only: each point reads as a block of four layouts
      for (const auto& [k, v] : p.settings) cells.push_back(i == 0 ? v : "");
      cells.push_back(i == 0 ? std::to_string(p.gpus) : "");
      cells.push_back(i == 0 ? std::to_string(p.global_batch) : "");
      const LayoutCells c = layout_cells(p, rows[i]);
      cells.push_back(layout_label(rows[i]));
      cells.push_back(std::find(w.begin(), w.end(), i) != w.end() ? "wins" : "");
      for (const auto& x : {c.ms, c.range, c.tps, c.mfu, c.memory, c.speedup, c.plan}) cells.push_back(x);
      t.row(cells);
    }
    lines += winner_line(p) + "\n";
  }
  return t.str() + "\nwhere each layout wins:\n" + lines;
}

std::string whatif_layout_csv(const std::vector<WhatIfPoint>& points) {
  std::string out;
  if (!points.empty())
    for (const auto& [k, v] : points.front().settings) out += csv_field(k) + ",";
  out += "gpus,global_batch,layout,wins,strategy,step_ms,range_ms,tokens_per_s,mfu,memory_gb,speedup_vs_megatron,plan\n";
  for (const auto& p : points) {
    const auto rows = layout_bests(p);
    const auto w = layout_winners(rows);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (const auto& [k, v] : p.settings) out += csv_field(v) + ",";
      const LayoutCells c = layout_cells(p, rows[i]);
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", p.gpus, p.global_batch, rows[i].name,
                         std::find(w.begin(), w.end(), i) != w.end() ? "yes" : "no", c.strategy, c.ms, c.range, c.tps, c.mfu_fraction, c.memory,
                         c.speedup, csv_field(c.plan));
    }
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

namespace {

/// "seq_len=4096 hbm_gb=80": the point's settings but the first key (the x axis); "" for one key.
std::string series_label(const WhatIfPoint& p) {
  std::string label;
  for (std::size_t k = 1; k < p.settings.size(); ++k) label += (label.empty() ? "" : " ") + p.settings[k].first + "=" + p.settings[k].second;
  return label;
}

/// What both charts share: c.series, c.data (one block per series; rows "x" then `columns(point)`),
/// and the script up to `plot` (output, title, axes, the legend's place, ticks, range). `x_text` is
/// the point's x as text (a tick label; placed by value when every point's is a number).
struct Frame {
  bool several = false;  ///< several series: the legend outside the plot
};
Frame chart_frame(WhatIfChart& c, const std::vector<WhatIfPoint>& points, const std::function<std::string(const WhatIfPoint&)>& x_text,
                  const std::string& xlabel, const std::string& title, const std::string& output,
                  const std::function<std::string(const WhatIfPoint&)>& columns, const std::string& single_key) {
  if (points.empty() || points.front().settings.empty()) throw common::ConfigError("--plot", "", "nothing to plot: no sweep");
  const auto& first = points.front().settings;
  for (const auto& p : points)
    if (p.settings.size() != first.size()) throw common::ConfigError("--plot", "", "the sweep points have different keys");
  const std::string key = first.front().first;
  // x: the first key's values (numeric: placed by value; otherwise one tick per distinct value)
  std::vector<std::string> xs;
  bool numeric = true;
  for (const auto& p : points) {
    const std::string v = x_text(p);
    if (std::find(xs.begin(), xs.end(), v) == xs.end()) xs.push_back(v);
    numeric &= is_number(v);
  }
  // numeric x is written as the number strtod read (never the user's text), categorical x as its tick index
  auto x_of = [&](const std::string& v) {
    return numeric ? fmt::format("{}", std::strtod(v.c_str(), nullptr)) : std::to_string(std::find(xs.begin(), xs.end(), v) - xs.begin());
  };
  // one series per combination of the other keys' values, in sweep order
  for (const auto& p : points) {
    const std::string label = series_label(p);
    if (std::find(c.series.begin(), c.series.end(), label) == c.series.end()) c.series.push_back(label);
  }
  // data: one gnuplot index (block) per series
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    if (si) c.data += "\n\n";
    c.data += fmt::format("# series {}: {}\n", si, printable(c.series[si].empty() ? key : c.series[si], false));
    for (const auto& p : points)
      if (series_label(p) == c.series[si]) c.data += fmt::format("{} {}\n", x_of(x_text(p)), columns(p));
  }
  std::size_t longest = 0;
  for (const auto& x : xs) longest = std::max(longest, x.size());
  const bool rotate = !numeric && longest > 10;
  std::string& s = c.script;
  s += "set output " + gp_quote(output) + "\n";
  s += "set title " + gp_quote(title) + " noenhanced\n";
  s += "set xlabel " + gp_quote(xlabel) + " noenhanced\n";
  s += "set ylabel 'throughput (thousand tokens/s, whole cluster)'\n";
  s += "set grid\nset yrange [0:*]\n";
  // several series: the legend right of the plot (short titles; the chart's title says what the lines are), so it
  // hides no point; one series: inside, with a right margin so that no tick label is cut off
  Frame f{.several = c.series.size() > 1};
  s += f.several ? "set key outside right top box noenhanced\n" : "set key " + single_key + " box opaque noenhanced\nset rmargin 6\n";
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
  return f;
}

/// Thousand tokens/s of a plan for the chart's data; NaN (a gap in the line) without one.
std::string ktps(const RankedPlan* p) { return p ? fmt::format("{:.6g}", p->report.tokens_per_s / 1e3) : std::string("NaN"); }

std::string key_description(const std::string& key) {
  for (const auto& [k, what] : sweep_keys())
    if (k == key) return what;
  return key;
}

}  // namespace

WhatIfChart whatif_chart(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& output,
                         const std::string& data_path) {
  WhatIfChart c;
  const Frame f = chart_frame(
      c, points, [](const WhatIfPoint& p) { return p.settings.front().second; },
      points.empty() || points.front().settings.empty() ? std::string() : key_description(points.front().settings.front().first), title,
      output,
      [](const WhatIfPoint& p) {
        const auto& r = p.result;
        return fmt::format("{} {}", ktps(r.baseline ? &*r.baseline : nullptr), ktps(r.top.empty() ? nullptr : &r.top.front()));
      },
      "bottom right");
  // per series: tuned solid, baseline dashed, same colour
  std::string& s = c.script;
  s += "plot ";
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    const std::string tuned = f.several ? "tuned, " + c.series[si] : "tuned: best plan (slicetune tune)";
    const std::string base = f.several ? "baseline, " + c.series[si] : "baseline: best Megatron plan (no overlap)";
    s += fmt::format("{}{} index {} using 1:3 with linespoints lw 2 pt 5 lc {} title {}, \\\n", si ? "     " : "", gp_quote(data_path), si,
                     si + 1, gp_quote(tuned));
    s += fmt::format("     {} index {} using 1:2 with linespoints lw 2 dt 2 pt 7 lc {} title {}{}\n", gp_quote(data_path), si, si + 1,
                     gp_quote(base), si + 1 < c.series.size() ? ", \\" : "");
  }
  return c;
}

WhatIfChart whatif_layout_chart(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& output,
                                const std::string& data_path) {
  WhatIfChart c;
  // a GPU-count sweep reads as GPUs on x (8, 16, 32, ...: what scaling charts show), not nodes
  const bool by_gpus = !points.empty() && !points.front().settings.empty() && points.front().settings.front().first == "nodes";
  const std::string xlabel = points.empty() || points.front().settings.empty() ? std::string()
                             : by_gpus ? std::string("GPUs (nodes x GPUs per node)")
                                       : key_description(points.front().settings.front().first);
  const Frame f = chart_frame(
      c, points, [&](const WhatIfPoint& p) { return by_gpus ? std::to_string(p.gpus) : p.settings.front().second; }, xlabel, title, output,
      [](const WhatIfPoint& p) {
        std::string row;
        for (const auto& l : layout_bests(p)) row += (row.empty() ? "" : " ") + ktps(l.best);
        return row;
      },
      "top left");
  // a colour per layout; 1d and 2d wide and solid, 1d megatron and 2.5d narrow and dashed on top of
  // them, so that a layout tied with another (1d = megatron where no overlap strategy helps, 2.5d
  // [q,q,d] = 2d [q,q] with d x the dp) still shows; a point shape per series
  static const std::array<const char*, 4> single{"1d: best 1D plan, any strategy", "1d megatron: 1D without overlap (baseline)",
                                                 "2d: best SUMMA q x q grid", "2.5d: best SUMMA q x q x d grid"};
  static const std::array<const char*, 4> name{"1d", "1d megatron", "2d", "2.5d"};
  static const std::array<const char*, 4> style{"lw 4 dt 1", "lw 2 dt 2", "lw 4 dt 1", "lw 2 dt 3"};
  static const std::array<int, 6> shape{7, 5, 9, 11, 13, 3};
  std::string& s = c.script;
  s += "plot ";
  for (std::size_t si = 0; si < c.series.size(); ++si)
    for (std::size_t l = 0; l < 4; ++l) {
      const std::string t = f.several ? std::string(name[l]) + ", " + c.series[si] : std::string(single[l]);
      const bool last = si + 1 == c.series.size() && l == 3;
      s += fmt::format("{}{} index {} using 1:{} with linespoints {} pt {} lc {} title {}{}\n", si || l ? "     " : "", gp_quote(data_path), si,
                       l + 2, style[l], shape[si % shape.size()], l + 1, gp_quote(t), last ? "" : ", \\");
    }
  return c;
}

void plot_whatif(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& path, bool by_layout) {
#ifndef SLICETUNE_GNUPLOT
  (void)points;
  (void)title;
  (void)by_layout;
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
  const WhatIfChart chart = by_layout ? whatif_layout_chart(points, title, out, dat) : whatif_chart(points, title, out, dat);
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
