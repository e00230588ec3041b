// defines: tuner::SweepAxis, parse_sweep, apply_setting, whatif (re-tune at every point of a sweep),
//          WhatIfPoint, whatif_table, whatif_csv, whatif_json, WhatIfChart, whatif_chart, plot_whatif,
//          LayoutBest, layout_bests, layout_winners, scaling_of, whatif_layout_table, whatif_layout_csv,
//          whatif_layout_chart (the best plan of each tensor-parallel layout at every point: strong and weak scaling)
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
///   global_batch_per_gpu  sequences per step per GPU: the point's global batch is this x its GPUs
///                    (weak scaling when nodes are swept); applied after nodes and cluster
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};
/// @brief Parses "KEY=V1,V2"; throws common::ConfigError naming --sweep and the key on bad input.
SweepAxis parse_sweep(const std::string& arg);
/// @brief The keys parse_sweep accepts, with their meaning and unit.
const std::vector<std::pair<std::string, std::string>>& sweep_keys();

/// @brief Applies one setting. `cluster` must come first in a point (it replaces the whole cluster),
/// `global_batch_per_gpu` last (it reads the point's GPU count).
void apply_setting(hardware::ClusterSpec& c, SearchSpace& s, const std::string& key, const std::string& value);

struct WhatIfPoint {
  std::vector<std::pair<std::string, std::string>> settings;  ///< key, value as given
  SearchResult result;
  int gpus_per_node = 0;  ///< of the point's cluster: which prediction range applies (sim::prediction_range)
  int gpus = 0;           ///< GPUs of the point's cluster (nodes x GPUs per node)
  int global_batch = 0;   ///< sequences per step at the point (default_global_batch when nothing set it)
  std::vector<sim::TpLayout> tp_layouts;  ///< the layouts searched (SearchSpace::tp_layouts)
};

/// @brief Every combination of the axes (the first axis varies slowest), each re-tuned from scratch.
/// `progress(i, n)` is called before point i of n. Every point's settings are applied (and checked)
/// before the first is tuned; `global_batch_per_gpu` with `global_batch` swept or set in `space` is refused.
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
void plot_whatif(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& path, bool by_layout = false);

/// @brief The best plan of one tensor-parallel layout at a point, from the search's own whole
/// simulations (SearchResult::per_strategy and baseline): what `tune` shows as that layout's row.
struct LayoutBest {
  std::string name;                   ///< "1d", "1d megatron", "2d", "2.5d"
  sim::TpLayout layout = sim::TpLayout::one_d;
  bool searched = true;               ///< false: the layout was left out (--tp-layouts)
  const RankedPlan* best = nullptr;   ///< into the point's result; null: no feasible plan (or not searched)
};
/// @brief Four rows: the best 1D plan of any strategy, the best 1D Megatron-LM plan without overlap
/// (the baseline), the best 2D and the best 2.5D grid.
std::vector<LayoutBest> layout_bests(const WhatIfPoint& p);
/// @brief Indices into layout_bests of the layouts that win the point: the fastest of 1d, 2d and
/// 2.5d (1d megatron is one of the 1d plans), several when their step times are equal; empty when
/// no layout has a feasible plan.
std::vector<std::size_t> layout_winners(const std::vector<LayoutBest>& rows);
/// @brief What the sweep holds fixed when its GPU count varies: "strong scaling: global batch 64"
/// (the same global batch at every point), "weak scaling: 8 sequences per GPU" (global batch / GPUs
/// the same), else "" (one GPU count, or neither).
std::string scaling_of(const std::vector<WhatIfPoint>& points);
/// @brief One row per point and layout (the swept keys, GPUs, global batch, step time, range,
/// tokens/s, MFU, memory, speedup over 1d megatron, plan; the winners marked), then one line per
/// point naming the winner and its lead over the fastest other layout.
std::string whatif_layout_table(const std::vector<WhatIfPoint>& points);
std::string whatif_layout_csv(const std::vector<WhatIfPoint>& points);
/// @brief The chart of the per-layout throughput: one line per layout (a colour each) and per
/// combination of the other keys (a dash pattern each). With `nodes` as the first key x is the GPU count.
/// Data rows "x 1d megatron 2d 2.5d" in thousand tokens/s (NaN where a layout has no plan).
WhatIfChart whatif_layout_chart(const std::vector<WhatIfPoint>& points, const std::string& title, const std::string& output,
                                const std::string& data_path);

}  // namespace tuner
