// defines: sim::EngineModel (a resource model the engine calls whenever the set of running tasks
//          changes: it sets their rates from what each occupies), Activity, Stage, EngineView,
//          ModelFactory, default_models, make_link_sharing_model, make_interference_model
//
// As in SimGrid, the engine knows no network: it advances running activities at their rates and
// asks its models, in order, for new rates each time an activity starts, changes stage or ends.
// The engine sets every rate to 1 (solo speed) first; each model then lowers the rates of what
// shares its resource. Models price sharing: a lone compute kernel runs at solo speed without
// asking them. A new mechanism (NCCL's SM budget per channel, copy-engine transfers,
// point-to-point links shared with DP traffic) is a new model, or a new field of TaskCost that a
// model reads; the event loop does not change.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/cost_table.hpp"
#include "sim/resources.hpp"

namespace sim {

/// @brief Where a running task is: a compute kernel, or a collective's latency stage (no
/// bandwidth used) followed by its transfer stage (bandwidth-bound).
enum class Stage : std::uint8_t { compute, latency, transfer };

/// @brief A task while it runs.
struct Activity {
  int rank = 0;            ///< which simulated graph (the order given to Engine::simulate)
  std::uint32_t task = 0;  ///< task index in that graph
  StreamId stream = 0;
  Stage stage = Stage::compute;
  std::uint32_t flow = 0;          ///< one collective started together on all its simulated members shares one flow
  const TaskCost* cost = nullptr;  ///< what it costs and occupies (never null while running)
  double remaining = 0;            ///< ps of work left at solo speed
  double rate = 1;                 ///< fraction of solo speed: what the models set
  std::int64_t finish = 0;         ///< ps; the engine's
};

/// @brief What a model sees: the running activities and, per simulated rank, which activity runs
/// on each stream. Spans stay valid for the whole simulation; contents change between calls.
struct EngineView {
  /// One simulated rank's streams.
  struct Rank {
    std::span<const int> running;               ///< per stream: index into activities, or kIdle
    std::span<const StreamId> compute_streams;  ///< streams of kind compute, in stream order
    std::span<const StreamId> comm_streams;     ///< streams of kind comm, in stream order
  };
  static constexpr int kIdle = -1;

  std::span<Activity> activities;
  std::span<const Rank> ranks;
  std::span<const double> link_bytes_per_ps;  ///< capacity of one GPU's share of each link class (CostModel::links())
  const hardware::ClusterSpec* cluster = nullptr;
};

/// @brief A resource model. One instance per simulation (it may keep scratch state); not thread-safe.
class EngineModel {
 public:
  virtual ~EngineModel() = default;
  /// Lowers the rates of the activities that share this model's resource. Called after every
  /// change of the running set; earlier models in the list have already set their rates.
  virtual void update_rates(EngineView& view) = 0;
  /// Whether the rates this model sets depend only on the running set - each activity's rank,
  /// stream, stage, cost and flow, in order - so that the engine may remember them per set (it
  /// does when every model says so). A model with state of its own (time, history) returns false.
  virtual bool memoizable() const { return true; }
};

using ModelFactory = std::function<std::unique_ptr<EngineModel>(const hardware::CostModel&)>;

/// @brief Max-min fair sharing of each simulated rank's links (sim/maxmin.hpp): every collective
/// in its transfer stage is one variable bounded by its solo speed (1); each link class of each
/// rank is one constraint of that rank's capacity; a collective started together on several
/// simulated ranks is one variable on all of their links, so its members move at one rate.
std::unique_ptr<EngineModel> make_link_sharing_model(const hardware::CostModel& cost);
/// @brief Compute and communication on one GPU slow each other (hardware::rates_beside): a compute
/// kernel runs on the SMs the collectives' channels leave (a GEMM: wave quantization on them) and
/// shares HBM max-min with their traffic (hbm_amplification x the bytes they send); a collective
/// beside a compute-bound kernel loses sm_comm_slowdown of its speed (a collective spanning ranks by
/// the slowest member's factor).
std::unique_ptr<EngineModel> make_interference_model(const hardware::CostModel& cost);
/// @brief The engine's models, in order: link sharing, then interference.
std::vector<ModelFactory> default_models();

}  // namespace sim
