// defines: sim::graph_to_json, save_graph, load_graph, LoadedGraph (a step graph as JSON: its
//          model, plan, streams, groups, tensors, tasks and edges - to inspect, hand-edit and
//          simulate again)
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/step_graph.hpp"

namespace sim {

/// @brief The graph as one JSON object (format "slicetune-step-graph", version 1). Tasks carry
/// their operation ("kind" and its "shape"), stream and group by name, tags, operands (tensor
/// indices: "inputs", "outputs") and, for reading only, their "name"; edges are [from, to] pairs
/// of task indices. `cluster` (its name and node count) is recorded for load_graph's caller.
nlohmann::json graph_to_json(const StepGraph& g, const hardware::ClusterSpec& cluster);
/// @brief Writes graph_to_json atomically.
void save_graph(const std::string& path, const StepGraph& g, const hardware::ClusterSpec& cluster);
/// @brief The graphs of one step: graph_to_json of the one graph (pp 1), or, for a pipelined plan,
/// {"format": "slicetune-pipeline-step-graphs", "version", "cluster", "nodes", "stages": [one
/// graph_to_json per stage, in stage order]}; pipelined graphs also carry "micro_batches" and
/// each task's and tensor's "model_chunk" and "micro".
nlohmann::json graphs_to_json(const std::vector<StepGraph>& graphs, const hardware::ClusterSpec& cluster);
/// @brief Writes graphs_to_json atomically.
void save_graphs(const std::string& path, const std::vector<StepGraph>& graphs, const hardware::ClusterSpec& cluster);

/// @brief Parses a graph file; a syntax error throws common::ConfigError naming the file.
nlohmann::json read_graph_file(const std::string& path);
/// @brief The cluster name and node count a saved graph records ("cluster", "nodes"), to choose
/// the cluster load_graph resolves its plan against.
std::pair<std::string, int> saved_cluster(const nlohmann::json& j, const std::string& source);
/// @brief Reads a graph written by save_graph (or by hand). Its plan is resolved against
/// `cluster` (its GPU count must match) and everything is checked: names of streams, groups,
/// ops and kinds, integer ranges, tensor and task indices, edges forward in issue order. Bad input
/// throws common::ConfigError naming the source and the key ("tasks[12].shape.m").
StepGraph load_graph(const nlohmann::json& j, const std::string& source, const hardware::ClusterSpec& cluster);
/// @brief Reads what save_graphs wrote: one graph (as load_graph), or every stage of a pipelined
/// step, each checked as load_graph checks a graph, all of one plan, one per stage in order (stage
/// i's graph is rank world_rank_of(plan, 0, 0, i)'s).
std::vector<StepGraph> load_graphs(const nlohmann::json& j, const std::string& source, const hardware::ClusterSpec& cluster);

}  // namespace sim
