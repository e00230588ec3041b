// defines: tuner::Evaluator (prices one plan: closed-form bounds, reduced-layer estimate, full
//          simulation), Estimate, rank_params
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/thread_front.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/model.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/plan.hpp"

namespace tuner {

using common::Duration;

/// @brief Parameters one rank holds (the sum of the step graph's weight tensors), closed form.
/// Pipelined plans: those of the stage that holds most.
std::int64_t rank_params(const sim::ModelSpec& m, const sim::Plan& p);
/// @brief Parameters pipeline stage `stage` holds (sim::Shapes::stage_params of its chunks).
std::int64_t stage_params(const sim::ModelSpec& m, const sim::Plan& p, int stage);
/// @brief Parameters the optimizer of pipeline stage `stage` steps: its ZeRO-1 shard (1/dp, rounded
/// up; bucket padding aside) or all of stage_params.
std::int64_t stage_optimizer_params(const sim::ModelSpec& m, const sim::Plan& p, int stage);

/// @brief A step predicted from two simulations of the model cut to `short_layers` and
/// `short_layers + 1` layers, extrapolated linearly to the model's layer count: the layers of a
/// transformer have the same shapes, so each added layer adds the same steady-state time.
/// Full recompute of some layers (block method): the two graphs are simulated with every layer
/// recomputed and with none, and each recomputed layer adds the difference per layer. Memory is
/// the closed-form model (sim::estimate_memory), exact.
struct Estimate {
  Duration step_time, compute, exposed_comm, idle;
  std::vector<sim::StreamTime> streams;  ///< each stream's busy time, extrapolated
  Duration lower_bound;  ///< compute_lower_bound of the plan; step_time is never below it
  double model_flops = 0, mfu = 0, tokens_per_s = 0;
  sim::MemoryEstimate memory;
  bool extrapolated = false;  ///< false: the model was small enough to simulate whole
};

/// @brief A lower bound of one micro-batch's run of a graph (tasks of every micro-batch only): the
/// sum, along the compute stream, of the least time between the starts of consecutive tasks (the
/// longest path between them through data and stream-order edges at solo times, where both are
/// of one layer; else the first one's solo time). `layer_ps`: the part starting at the layers'
/// tasks (a graph of L layers: L times a layer's), `rest_ps` the rest (embedding, head side).
struct StreamChain {
  double rest_ps = 0, layer_ps = 0;
  /// The compute stream's tasks at their solo time (as the engine prices them): all of them, those
  /// of the layers, and outside the layers the embedding's and the rest (the head side).
  double solo_ps = 0, layer_solo_ps = 0, embedding_solo_ps = 0, head_solo_ps = 0;
};
StreamChain compute_stream_chain(const sim::StepGraph& g, const hardware::CostModel& cost);

/// @brief Prices plans of one model on one cluster. Thread-safe (const; the cost model must be).
class Evaluator {
 public:
  Evaluator(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const hardware::CostModel& cost, int short_layers = 1)
      : model_(model), cluster_(cluster), cost_(cost), short_layers_(short_layers) {}

  /// A lower bound of the step time. Per micro-batch, the engine can neither run the compute
  /// stream faster than the solo time of its kernels (one in-order stream, rates <= 1) - nor, more
  /// tightly, close the gaps a kernel waits in for what it needs within its layer (a Megatron-LM
  /// GEMM for the all-reduce before it: compute_stream_chain) - nor start a
  /// kernel before the host has issued it (launch cost x launches, in graph order). Both sums are
  /// linear in the layer count (every layer's tasks are alike), so they are taken from a graph of
  /// one layer - its layer's tasks times the layers, plus the rest - once per plan class (strategy
  /// and its knobs, tp, micro-batch, SP, sequence, dtype, stack, recompute mode, attention kernel:
  /// every dp, ZeRO stage and bucket size share the class; a recomputed layer adds what a layer
  /// recomputed adds). Bound =
  /// (accum - 1) x max(compute, host) + max(compute + optimizer, host), the optimizer over this
  /// rank's ZeRO shard. Pipelined plans: per pipeline rank r, its own work m x W_r
  /// cannot start before micro-batch 0 has passed the virtual stages below it nor end before the
  /// last micro-batch's gradient has gone back through them, and rank 0's optimizer comes after
  /// that: max over r of sum_{v < r} C_v + m W_r + optimizer_0, and of m W_r + optimizer_r (rank
  /// r's own optimizer runs beside the way back; C_v: a virtual stage's compute per micro-batch,
  /// its layers' gaps as compute_stream_chain has them) - tight for uniform
  /// stages: (m + pp - 1) C, (vp m + pp - 1) C / vp interleaved.
  Duration compute_lower_bound(const sim::Plan& p) const;
  /// The cheaper, looser bound without any graph: solo time of the GEMMs and attention kernels
  /// only, from the layer shapes (sim/shapes.hpp, the shapes the builder emits) in closed form.
  Duration gemm_lower_bound(const sim::Plan& p) const;
  /// A bound below compute_lower_bound that costs a map lookup and a little arithmetic: the GEMM
  /// and attention solo time per micro-batch of the plan's class (cached) - with the element-wise
  /// kernels of the builder's pieces where the strategy issues all of them (GemmParts) - with the
  /// forward recompute runs again (the attention under selective, the recomputed layers' GEMMs,
  /// attention and element-wise kernels under full), times the micro-batches, without the
  /// optimizer; pipelined plans: pipeline_lower_bound's pipeline (fill and drain included) over
  /// those kernels alone. The search orders and prunes by it first and
  /// computes compute_lower_bound only for the plans it cannot prune (tuner/search.cpp).
  Duration cheap_lower_bound(const sim::Plan& p) const { return cheap_lower_bound(p, gemm_parts(p)); }
  /// Solo time of one micro-batch's GEMMs and attention kernels per layer and in the LM head
  /// (gemm_lower_bound's sums), and what recompute adds to them, cached per class; the memory
  /// savers (ZeRO, recompute) and dp leave it as it is, so plans differing only in those may share one.
  struct GemmParts {
    std::int64_t layer_ps = 0, head_ps = 0;
    /// what recompute runs again per layer: full, the layer's forward GEMMs and attention (every
    /// row slice); selective, the attention forward
    std::int64_t layer_fwd_ps = 0, attention_fwd_ps = 0;
    /// the element-wise kernels of the builder's pieces (sim::Shapes::for_each_layer_elementwise:
    /// norms, residual adds, activation; where the strategy issues every piece, Strategy::
    /// issues_builder_pieces, and not on a grid; else 0), every row slice: per layer, forward and
    /// backward / forward alone (what full recompute runs again); the head side; the embedding
    std::int64_t ew_layer_ps = 0, ew_layer_fwd_ps = 0, ew_head_ps = 0, ew_emb_ps = 0;
    /// how many of those kernels, each launched (a task of its own): the stack's op overhead apiece
    std::int64_t ew_layer_n = 0, ew_layer_fwd_n = 0, ew_head_n = 0, ew_emb_n = 0;
    /// where those are counted: the GEMM sites and attention kernels of the same pieces, each
    /// issued as at least one call (a chunked or fused site's first piece; the stack's op overhead
    /// apiece): per layer / its forward / the head; the attention forward (selective recompute)
    std::int64_t launched_layer_n = 0, launched_layer_fwd_n = 0, launched_head_n = 0, launched_attention_fwd_n = 0;
  };
  GemmParts gemm_parts(const sim::Plan& p) const;
  /// cheap_lower_bound of `p` from its class's gemm_parts.
  Duration cheap_lower_bound(const sim::Plan& p, const GemmParts& parts) const;
  /// Reduced-layer estimate (see Estimate). Pipelined plans (tuner/pipeline_estimate.cpp): one
  /// micro-batch through the stage graphs of a model cut to 1 and 2 layers per virtual stage gives
  /// every pass's and transfer's time, extrapolated to the plan's layers per virtual stage; the
  /// plan's micro-batches are replayed in the schedule's order (replay_schedule); memory from the
  /// closed form (MemoryModel).
  Estimate estimate(const sim::Plan& p) const;
  /// The whole model through the step graph and the engine (sim::simulate_plan: a long pipelined
  /// step from two shorter ones).
  sim::StepReport simulate(const sim::Plan& p) const;
  /// The same simulation with its timelines, and the graphs simulated.
  sim::SimulatedPlan simulate_kept(const sim::Plan& p) const;

  /// A hash of the class graph compute_lower_bound builds for `p` (plans of one class, and the
  /// tp_channels siblings of a class, share it): the search computes each batch's bounds class by
  /// class on its threads, so two threads do not build the same class graph at once.
  std::size_t bound_class_hash(const sim::Plan& p) const;
  struct ClassBound {
    double compute_ps = 0, host_ps = 0;              ///< one micro-batch of the whole model
    double layer_compute_ps = 0, layer_host_ps = 0;  ///< what one more layer adds
    /// the same split for pipelined plans: per layer (its own tasks), the embedding side, the head
    /// side (compute stream, solo), host issue time per layer
    double layer_ps = 0, emb_ps = 0, head_ps = 0, host_layer_ps = 0;
    /// compute_stream_chain of one micro-batch of the whole model / what one more layer adds
    double chain_ps = 0, layer_chain_ps = 0;
  };
  /// The bound of one micro-batch of `p`'s class (cached; built once per class, or once for a
  /// class and its tp_channels siblings: a sibling's graph is the NCCL-choice graph with the TP
  /// collectives on its channels' SMs).
  ClassBound class_bound(const sim::Plan& p) const;
  /// The same bound from the class's own graph, built now and not cached: what class_bound must
  /// equal (tests/tuner).
  ClassBound built_class_bound(const sim::Plan& p) const;
  /// One-layer class graphs compute_lower_bound has built so far (a class and its tp_channels
  /// siblings share one: class_bound).
  std::size_t bound_classes() const { return graphs_built_.load(std::memory_order_relaxed); }
  const sim::ModelSpec& model() const { return model_; }
  const hardware::ClusterSpec& cluster() const { return cluster_; }
  const hardware::CostModel& cost() const { return cost_; }
  int short_layers() const { return short_layers_; }

 private:
  const sim::ModelSpec& model_;
  const hardware::ClusterSpec& cluster_;
  const hardware::CostModel& cost_;
  int short_layers_;
  Duration pipeline_lower_bound(const sim::Plan& p, const ClassBound& b) const;
  /// pipeline_lower_bound's maximum over pipeline ranks, in ps (without the GEMM bound's floor);
  /// `optimizer`: each rank's optimizer step included.
  double pipeline_work_bound(const sim::Plan& p, const ClassBound& b, bool optimizer) const;
  Estimate pipeline_estimate(const sim::Plan& p) const;
  /// Plan knobs a class key holds (sim::plan_knobs(), then the grid's 4 fields); more throws.
  static constexpr std::size_t kMaxKeyKnobs = 28;
  struct ClassKey {
    std::string_view strategy;  ///< its name
    int tp, micro_batch;
    bool sequence_parallel;
    std::int64_t seq_len;
    int dtype, stack, recompute, attention;
    std::array<int, kMaxKeyKnobs> knobs{};  ///< every plan knob's value where it applies, else neutral; the grid; then 0
    auto operator<=>(const ClassKey&) const = default;
  };
  /// class_bound of the class graph `g` (one layer) of a plan like `p`.
  ClassBound bound_of_graph(const sim::StepGraph& g, const sim::Plan& p) const;
  /// The plan whose one-layer graph bounds `p`'s class (dp 1, pp 1, no ZeRO, one micro-batch, full
  /// recompute of every layer), with strategy `st`.
  sim::Plan class_plan(const sim::Plan& p, const sim::Strategy* st) const;
  /// `p`'s class; `neutral_as_default`: a strategy whose neutral graph has the default strategy's
  /// tasks keys as the default strategy (the graph-based bounds); `st` receives the strategy keyed.
  ClassKey class_key(const sim::Plan& p, bool neutral_as_default, const sim::Strategy*& st) const;
  /// The reduced-layer estimate of `p` as it is (recompute included, applied to every layer).
  Estimate estimate_uniform(const sim::Plan& p) const;
  using GemmKey = std::array<std::int64_t, 16>;
  struct GemmKeyHash {
    std::size_t operator()(const GemmKey& k) const {
      std::size_t h = 1469598103934665603ull;
      for (std::int64_t v : k) h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
      return h;
    }
  };
  static std::size_t class_hash(const ClassKey& k);
  /// The caches are sharded by key hash, each shard behind a reader-writer lock: a search's threads
  /// look up far more than they add, and one lock for all of them made every other lookup wait
  /// (futex calls of `slicetune tune` on 2 threads: most of its 1,108 were this lock).
  static constexpr std::size_t kShards = 16;
  struct BoundShard {
    std::shared_mutex mu;
    std::map<ClassKey, ClassBound> bounds;
  };
  struct GemmShard {
    std::shared_mutex mu;
    std::unordered_map<GemmKey, GemmParts, GemmKeyHash> parts;
  };
  mutable std::array<BoundShard, kShards> bounds_;
  mutable std::atomic<std::size_t> graphs_built_{0};
  mutable std::array<GemmShard, kShards> gemm_parts_;
  /// gemm_parts of `key` from gemm_parts_ (computed and added on a miss)
  GemmParts shared_gemm_parts(const sim::Plan& p, const GemmKey& key) const;
  const std::uint64_t id_ = common::unique_id();  ///< gemm_parts_' owner in each thread's common::ThreadFront
};

}  // namespace tuner
