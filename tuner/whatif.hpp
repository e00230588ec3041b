// defines: tuner::SweepAxis, parse_sweep, apply_setting, whatif (re-tune at every point of a sweep),
//          WhatIfPoint, whatif_table, whatif_csv, whatif_json, WhatIfChart, whatif_chart, plot_whatif
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tuner/search.hpp"

namespace tuner {

/// @brief One swept key and its values, from `--sweep KEY=V1,V2,...`.
/// Keys (named after the cluster-file keys; units as there):
///   nvlink_gb_per_s  node.nvlink_gb_per_s  NVLink bandwidth per GPU, GB/s per direction
///   nic_gbit_per_s   network.nic_gbit_per_s  bandwidth of one NIC, Gbit/s per direction
///   nics_per_node    network.nics_per_node
///   latency_us       network.latency_us  inter-node latency, microseconds
///   nodes            number of nodes
///   cluster          another cluster file or name (GPU type and fabric; keeps the node count)
///   hbm_gb           gpu.hbm_gb  GPU memory, GB
///   seq_len          sequence length, tokens
///   global_batch     sequences per step
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};
/// @brief Parses "KEY=V1,V2"; throws common::ConfigError naming --sweep and the key on bad input.
SweepAxis parse_sweep(const std::string& arg);
/// @brief The keys parse_sweep accepts, with their meaning and unit.
const std::vector<std::pair<std::string, std::string>>& sweep_keys();

/// @brief Applies one setting. `cluster` must come first in a point (it replaces the whole cluster).
void apply_setting(hardware::ClusterSpec& c, SearchSpace& s, const std::string& key, const std::string& value);

struct WhatIfPoint {
  std::vector<std::pair<std::string, std::string>> settings;  ///< key, value as given
  SearchResult result;
  int gpus_per_node = 0;  ///< of the point's cluster: which prediction range applies (sim::prediction_range)
};

/// @brief Every combination of the axes (the first axis varies slowest), each re-tuned from scratch.
/// `progress(i, n)` is called before point i of n.
std::vector<WhatIfPoint> whatif(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const SearchSpace& space,
                                const std::vector<SweepAxis>& axes, const SearchOptions& options,
                                const std::function<void(std::size_t, std::size_t)>& progress = {});

std::string whatif_table(const std::vector<WhatIfPoint>& points);
/// @brief One row per point: the swept keys, then baseline and tuned step time, tokens/s, MFU,
/// speedup, plans.
std::string whatif_csv(const std::vector<WhatIfPoint>& points);
nlohmann::json whatif_json(const std::vector<WhatIfPoint>& points);
/// @brief A gnuplot chart of a sweep: x is the first swept key (placed by value when every value is a
/// number, else one tick per value); one pair of lines (tuned solid, baseline dashed, one colour) per
/// combination of the other keys' values (`series`, "" for a single key), the legend outside the plot.
struct WhatIfChart {
  std::vector<std::string> series;  ///< "seq_len=4096", one per pair of lines, in sweep order
  std::string data;                 ///< gnuplot data: one block (index) per series, rows "x baseline tuned" (thousand tokens/s)
  std::string script;               ///< everything after `set terminal`; user strings in gnuplot single quotes
};
/// @brief The chart of `points` drawn to `output` from data file `data_path`; throws
/// common::ConfigError when there is no sweep or the points have different keys.
WhatIfChart whatif_chart(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& output,
                         const std::string& data_path);
/// @brief Draws tokens/s of the baseline and of the tuned plan against the sweep with gnuplot
/// (PNG or SVG by the extension of `path`), written atomically. Throws ConfigError when gnuplot
/// is missing or fails.
void plot_whatif(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& path);

}  // namespace tuner
