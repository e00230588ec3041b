// defines: sim::StreamSpec, StreamKind, StreamId, GroupSpec, GroupId (the streams and communicator
//          groups a rank's step graph declares: resources as data, not fixed enums)
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace sim {

/// @brief Index of a stream in StepGraph::streams.
using StreamId = std::uint8_t;
/// @brief Index of a communicator group in StepGraph::groups.
using GroupId = std::uint8_t;

/// @brief What the work on a stream occupies while it runs. Compute kernels hold the SMs and stream
/// HBM; communication moves bytes over links (and, for NCCL kernels, holds the SMs of its channels).
/// Engine models (sim/engine_model.hpp) read this to decide who slows whom.
enum class StreamKind : std::uint8_t { compute, comm };
std::string_view to_string(StreamKind k);
bool parse_stream_kind(std::string_view s, StreamKind& out);

/// @brief One in-order queue of a rank (a CUDA stream): tasks on it run one at a time in issue
/// order; edges across streams are events.
/// Reports name a communication stream's busy time after it: "tp_comm" -> "TP communication"
/// (stream_label), so such streams are named after what they carry.
struct StreamSpec {
  std::string name;  ///< "compute", "tp_comm", "dp_comm"; traces, reports and saved graphs name it so
  StreamKind kind = StreamKind::compute;
  bool operator==(const StreamSpec&) const = default;
};

/// @brief What reports call a stream's busy time: "<X>_comm" -> "<X upper-cased> communication"
/// ("TP communication"), any other name as it is.
std::string stream_label(std::string_view name);

/// @brief A communicator the rank belongs to: "tp" and "dp" today; "pp", "cp", "ep" and a 2D grid's
/// "row" / "col" / "depth" groups, or a two-rank point-to-point pair, are declared the same way.
/// Ranks whose graphs declare a group with the same name and instance are members of one
/// communicator: the engine starts a collective on all of its simulated members together, matched
/// by the tasks' sequence numbers on that group (Task::seq).
struct GroupSpec {
  std::string name;
  int size = 1;      ///< ranks in the communicator
  int nodes = 1;     ///< nodes it spans
  int instance = 0;  ///< which communicator of this name the rank is in
  bool operator==(const GroupSpec&) const = default;
};

}  // namespace sim
