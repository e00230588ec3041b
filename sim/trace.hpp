// defines: sim::ChromeTrace (Chrome trace-event JSON: opens in Perfetto and chrome://tracing)
#pragma once
#include <string>
#include <vector>

#include "sim/engine.hpp"

namespace sim {

/// @brief Collects timelines as processes (one per rank and source: "predicted rank 0",
/// "measured rank 0") with one track per stream, then writes them as one JSON file.
/// Task names carry layer / phase / op / slice / chunk; args carry the tags, bytes, FLOPs, output
/// shapes and (with a cost model) the NCCL algorithm; the category is the resource the task uses
/// ("compute", "tp", "dp"), so communication can be filtered; flow arrows follow every dependency
/// that crosses streams.
class ChromeTrace {
 public:
  /// With a cost model, collectives' args also carry NCCL's algorithm, protocol and channels.
  explicit ChromeTrace(const hardware::CostModel* cost = nullptr) : cost_(cost) {}
  /// Adds one rank's timeline under process `label`; times in the trace are microseconds.
  ChromeTrace& add(const std::string& label, const StepGraph& graph, const std::vector<TaskTiming>& timing);
  /// Adds every timeline of a report: one process per distinct rank graph, "<prefix> rank N", with
  /// "(stands for K ranks, identical by symmetry)" when the graph represents K > 1 ranks.
  ChromeTrace& add(const std::string& prefix, const StepReport& report);
  std::string json() const;
  /// Writes atomically.
  void write(const std::string& path) const;

 private:
  const hardware::CostModel* cost_ = nullptr;
  std::vector<std::string> events_;
  int next_pid_ = 1;
  long long next_flow_ = 1;
};

}  // namespace sim
