// defines: sim::Strategy (one overlap strategy: its name, knobs, validity check and schedule),
//          Knob, TpOverlap, the registry (strategies, find_strategy, register_strategy,
//          default_strategy, plan_knobs) and the built-in entries strategy_none, strategy_domino,
//          strategy_te_pipelined, strategy_async_tp, strategy_te_bulk, strategy_fused, check_te_userbuffers
//
// A strategy is one file (sim/strategy_<name>.cpp) that fills a Strategy and schedules the layers
// with the builder's vocabulary (sim/builder.hpp), plus one line in the registry (sim/strategy.cpp,
// or register_strategy for a plug-in outside sim/). Plan parsing and printing, the command-line
// flags, the tuner's search space and its baseline all read the registry; docs/strategies.md walks
// through adding one.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace sim {

class Builder;

/// @brief A plan setting that a strategy reads, with everything that parses, prints, checks and
/// searches it. Values are integers; a knob with `choices` stores the index of the named choice.
/// The value lives in a Plan field (get/set) and a PlanInput field (get_input/set_input), so a
/// knob with a new meaning adds one field to each (sim/plan.hpp).
struct Knob {
  std::string_view key;                   ///< YAML key and JSON field ("row_slices")
  std::string_view flag;                  ///< command-line flag ("--row-slices")
  std::string_view help;                  ///< the flag's help text
  std::vector<std::string_view> choices;  ///< named values (row_axis: batch, sequence); empty: an integer
  int min = 1, max = 64;                  ///< integer range, inclusive
  int neutral = 1;                        ///< the value that means "not used" (one slice): plans of other strategies hold it
  int default_value = 1;                  ///< the value under this strategy when the plan does not say
  std::vector<int> searched;              ///< the values the tuner tries (tuner::SearchSpace may override)
  Infeasibility refused_as = Infeasibility::strategy;  ///< how the tuner counts a plan whose value is out of range
  int (*get)(const Plan&);
  void (*set)(Plan&, int);
  std::optional<int> (*get_input)(const PlanInput&);
  void (*set_input)(PlanInput&, int);
  /// Whether the value matters, given the plan's other knobs (row_axis only with row_slices > 1).
  /// The tuner tries one value where it does not; a plan of another strategy may hold any value.
  bool (*applies)(const Plan&) = [](const Plan&) { return true; };

  /// "sequence" for a choice, "4" for an integer.
  std::string format(int value) const;
  /// The value of `text`, or nullopt if it is no choice / not an integer in [min, max].
  std::optional<int> parse(std::string_view text) const;
  /// "batch | sequence" or "integer 1..64": what parse accepts, for error messages.
  std::string expected() const;
};

/// @brief How a strategy decomposes the TP collectives around the GEMMs under sequence
/// parallelism: the builder emits the pieces so (sim/builder.hpp), the tuner's GEMM bound and the
/// task-count limit read it. The default is none of it: one AllGather before each column-parallel
/// GEMM, one ReduceScatter after each row-parallel GEMM (chunk).
struct TpOverlap {
  /// AllGather + GEMM as tp steps (TE's ring_exchange, PyTorch's fused all-gather matmul): the GEMM
  /// on the local shard, while tp - 1 point-to-point steps, moved by copy engines (no SMs), bring
  /// the other shards one by one, each followed by the GEMM on it. Sites: QKV and FC1 (forward),
  /// out-proj and FC2 input-gradient GEMMs (the gathered output gradient).
  bool ag_peer_steps = false;
  /// GEMM + ReduceScatter of out-proj and FC2 (forward) cut into this many chunks along the tokens,
  /// each chunk's ReduceScatter overlapping the next chunk's GEMM (TE's pipeline method).
  int rs_splits = 1;
  /// SMs each chunk's ReduceScatter holds (TE's num_sm); -1: NCCL's channels, as the cost model prices it.
  int rs_sms = -1;
  /// SMs (NCCL channels) of every collective on the TP communicator unless a site sets its own
  /// (rs_sms, copy engines); -1: NCCL's channels, as the cost model prices them.
  int tp_sms = -1;
  /// GEMM + ReduceScatter as tp steps instead (PyTorch's fused matmul reduce-scatter): the output
  /// rows of each peer's shard, pushed to it by copy engines, then a local sum of the tp partials.
  bool rs_peer_steps = false;
  /// TE's bulk overlaps of the QKV and FC1 backward (> 0): the AllGather of the norm output the
  /// weight-gradient GEMM needs runs beside the input-gradient GEMM, and the input gradient's
  /// ReduceScatter beside the weight-gradient GEMM, each whole on this many SMs (TE's num_sm of
  /// the bulk sites) and issued by the GEMM call it overlaps (no launch of its own). The schedule
  /// decides that the weight-gradient GEMM does not wait for the ReduceScatter (strategy te-bulk).
  int bulk_sms = 0;
  /// FLUX's fused kernels (strategy fused): each AllGather + GEMM site (QKV, FC1 forward; out-proj,
  /// FC2 input gradients) and each GEMM + ReduceScatter site (out-proj, FC2 forward; QKV, FC1
  /// input gradients) is one kernel whose GEMM runs as tile-row chunks, each priced as its share of
  /// the whole kernel (sim::FusedPiece), while the kernel's transfers run beside them on a stream
  /// of their own, fused_comm (sim/builder.cpp). The other flags are off with it.
  bool fused = false;
  /// A fused GEMM + ReduceScatter on Hopper pulls its tiles from the GEMM's first wave on: its
  /// chunks are tp x up to this many (about one wave each), so that the pull starts after about
  /// one wave as FLUX's does (hardware::tp_gemm_fused). Elsewhere a site has tp chunks.
  static constexpr int kFusedMaxSubchunks = 4;

  /// Token chunks each GEMM site is cut into, each priced as a GEMM of its own (the tuner's GEMM
  /// bound). A fused site's chunks are shares of one kernel: 1.
  int ag_chunks(int tp) const { return ag_peer_steps ? tp : 1; }
  int rs_chunks(int tp) const { return rs_peer_steps ? tp : rs_splits; }
  /// Whether a site is cut into pieces (bulk_sms cuts nothing: its collectives stay whole).
  bool any() const { return ag_peer_steps || rs_peer_steps || rs_splits > 1 || fused; }
};

/// @brief One overlap strategy: an entry of the registry.
struct Strategy {
  std::string_view name;         ///< the plan's `strategy` value ("domino")
  std::string_view description;  ///< one line for help texts and docs
  std::vector<Knob> knobs;       ///< the settings it reads, in the order the tuner enumerates them
  bool baseline = false;         ///< the tuner's reference plan: no overlap (Megatron-LM)
  bool searched = true;          ///< in the tuner's default search space
  /// With every knob neutral, the graph has default_strategy()'s tasks on the same streams (it may
  /// order them differently): the tuner's compute bound, a sum over tasks, is then shared.
  bool neutral_tasks_are_default = false;
  /// Its schedule issues, for every row slice, each of the builder's pieces of a layer (emit_attn_fwd,
  /// emit_attn_residual, emit_mlp_fwd, emit_mlp_residual and their backward emit_mlp_bwd,
  /// emit_mlp_norm_bwd, emit_attn_bwd, emit_attn_norm_bwd), of the embedding and of the head, as
  /// Megatron-LM's and Domino's schedules do: the tuner's cheap lower bound then counts their
  /// element-wise kernels (Shapes::for_each_layer_elementwise) beside the GEMMs and attention. Leave
  /// it false for a schedule that leaves out or replaces any of them (a plug-in's, say).
  bool issues_builder_pieces = false;
  /// The strategy's part of describe(plan): "megatron", "domino 2x1 seq".
  std::string (*describe)(const Plan&);
  /// Why the strategy cannot run this plan (one line), beyond the shared checks of check_plan.
  std::optional<std::string> (*check)(const ModelSpec&, const hardware::ClusterSpec&, const Plan&) =
      [](const ModelSpec&, const hardware::ClusterSpec&, const Plan&) -> std::optional<std::string> { return std::nullopt; };
  /// Issues the layers of one micro-batch through the builder, in host issue order.
  void (*schedule)(Builder&);
  /// How it decomposes the TP collectives around the GEMMs (TpOverlap); the builder reads it
  /// before the schedule runs.
  TpOverlap (*tp_overlap)(const Plan&) = [](const Plan&) { return TpOverlap{}; };
  /// Why `slicetune run` cannot execute its graph (empty: it can).
  std::string_view not_executed;

  const Knob* knob(std::string_view key) const;
};

/// @brief Every registered strategy, in registration order (built-ins first: none, domino).
std::span<const Strategy* const> strategies();
/// @brief The strategy named `name`; throws common::ConfigError naming `source` and `key` and
/// listing the registered names if there is none.
const Strategy& find_strategy(std::string_view name, const std::string& source = "plan", const std::string& key = "strategy");
/// @brief Adds a strategy (a plug-in, or a test's). `s` must outlive every use (a static); its name
/// must be new (std::invalid_argument otherwise). Register before any search or simulation runs:
/// the registry is read without a lock.
void register_strategy(const Strategy& s);
/// @brief The strategy of a plan that does not name one, and the tuner's baseline: none.
const Strategy& default_strategy();
/// @brief Every knob of every registered strategy, once per key, in registration order: what plan
/// files, flags, JSON and YAML carry.
std::span<const Knob* const> plan_knobs();
/// @brief For each of plan_knobs(), the strategy's own knob of that key, or null if it has none
/// (then the plan holds the knob's neutral value). Throws std::logic_error for an unregistered strategy.
std::span<const Knob* const> own_knobs(const Strategy& s);

/// @brief The `tp_channels` knob (NCCL channels of the TP communicator, 0: NCCL's choice) that
/// strategies whose TP collectives are NCCL's own kernels declare, with the values the tuner tries.
Knob tp_channels_knob(std::vector<int> searched, bool (*applies)(const Plan&));
/// @brief Why a plan's tp_channels cannot be set (one line), or nullopt.
std::optional<std::string> check_tp_channels(const hardware::ClusterSpec& c, const Plan& p);
/// @brief " ch8" for 8 channels, "" for NCCL's choice: the describe() suffix.
std::string describe_tp_channels(const Plan& p);

/// @brief Megatron-LM's issue order for one micro-batch (strategy none's schedule, in
/// sim/strategy_none.cpp): every layer's blocks in data order, the LM head's weight-gradient GEMM
/// after its input-gradient collective, and the layers' too where `layer_wgrad_waits` (one stream,
/// as Megatron-LM issues them); without it they run beside their collectives (te-bulk).
void schedule_megatron(Builder& b, bool layer_wgrad_waits);

const Strategy& strategy_none();    ///< sim/strategy_none.cpp: Megatron-LM, no overlap
const Strategy& strategy_domino();  ///< sim/strategy_domino.cpp: DeepSpeed-Domino row and column slicing
const Strategy& strategy_te_pipelined();  ///< sim/strategy_te_pipelined.cpp: TransformerEngine userbuffers' pipelined overlap
const Strategy& strategy_async_tp();      ///< sim/strategy_async_tp.cpp: PyTorch's async tensor parallelism
const Strategy& strategy_te_bulk();       ///< sim/strategy_te_bulk.cpp: TransformerEngine userbuffers' bulk overlap
const Strategy& strategy_fused();         ///< sim/strategy_fused.cpp: FLUX's fused GEMM + communication kernels

/// @brief What TransformerEngine's userbuffers and Megatron-LM's --tp-comm-overlap refuse for every
/// method (sim/strategy_te_pipelined.cpp): tp 1, no sequence parallelism, on GPUs the TP group
/// across nodes. One line with the framework's reason, or nullopt. te-pipelined and te-bulk share it.
std::optional<std::string> check_te_userbuffers(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p);

}  // namespace sim
