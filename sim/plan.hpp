// defines: sim::Plan (a resolved parallelism + slicing plan), PlanInput (what the user gave),
//          PipelineSchedule, Infeasibility, check_plan, fill_plan, resolve_plan, load_plan_input, plan_to_yaml
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "common/units.hpp"
#include "sim/model.hpp"
#include "sim/recompute.hpp"

namespace sim {

struct Strategy;  // sim/strategy.hpp: the registry of overlap strategies
const Strategy& default_strategy();

/// @brief Which axis the builder cuts a micro-batch's rows along (sim/builder.hpp, Slice).
enum class RowAxis : std::uint8_t { batch, sequence };
std::string_view to_string(RowAxis a);

/// @brief The order in which a pipeline rank runs the forward and backward passes of a step's
/// micro-batches (sim/pipeline_schedule.hpp): one-forward-one-backward (PipeDream-Flush, Megatron-LM's
/// schedule without interleaving), or the interleaved schedule of Narayanan et al. 2021 over `vp`
/// model chunks per rank. Zero-bubble schedules would be further values.
enum class PipelineSchedule : std::uint8_t { one_f_one_b, interleaved };
/// "1f1b", "interleaved".
std::string_view to_string(PipelineSchedule s);
bool parse_pipeline_schedule(std::string_view s, PipelineSchedule& out);
/// @brief How the tensor-parallel group of tp GPUs splits each layer (docs/tensor-parallel-2d.md):
/// Megatron-LM's 1D split of the weights' columns or rows; 2D (Optimus: SUMMA on a q x q grid, tp =
/// q^2); 2.5D (Tesseract, Wang et al. arXiv 2105.14500: d layers of a q x q grid, tp = q^2 d, the
/// depth splitting the batch). Plan::tp_q and tp_d give the grid.
enum class TpLayout : std::uint8_t { one_d, two_d, two_five_d };
/// "1d", "2d", "2.5d".
std::string_view to_string(TpLayout l);
bool parse_tp_layout(std::string_view s, TpLayout& out);
/// @brief Which grid group a node's NVLink holds first under 2D / 2.5D: the q ranks of a grid row
/// (Colossal-AI's rank order: tp rank = column + q x row + q^2 x depth) or those of a grid column
/// (tp rank = row + q x column + q^2 x depth). Rows carry the activation blocks of the forward
/// broadcasts, columns the weight blocks.
enum class TpGridOrder : std::uint8_t { row, col };
std::string_view to_string(TpGridOrder o);
bool parse_tp_grid_order(std::string_view s, TpGridOrder& out);

/// @brief The highest ZeRO stage (1: optimizer state, 2: + gradients, 3: + parameters sharded over dp).
inline constexpr int kMaxZeroStage = 3;

/// @brief A fully resolved plan: every field has a value and the plan is feasible for its model
/// and cluster (resolve_plan checked it). row_slices, row_axis and col_slices are the builder's
/// slicing; a strategy that does not read them (its Strategy::knobs) leaves them neutral (1, batch, 1).
/// The memory savers (recompute, ZeRO, the attention kernel) apply to every strategy; at their
/// defaults (none, 0, the stack's kernel) a plan is what it was before they existed.
struct Plan {
  int tp = 1;  ///< GPUs of the tensor-parallel group (2D: tp_q^2; 2.5D: tp_q^2 x tp_d)
  TpLayout tp_layout = TpLayout::one_d;
  int tp_q = 1;  ///< 2D / 2.5D: the grid's side q (1 under 1D)
  int tp_d = 1;  ///< 2.5D: the grid's depth d (1 under 1D and 2D)
  TpGridOrder tp_grid_order = TpGridOrder::row;  ///< 2D / 2.5D: which grid group is adjacent in rank order
  int dp = 1;
  int pp = 1;  ///< pipeline stages (ranks of a pipeline); world rank = tp rank + tp x (dp rank + dp x stage)
  int vp = 1;  ///< model chunks (virtual stages) per pipeline rank: > 1 with the interleaved schedule
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  /// Layers of each virtual stage, pp x vp entries in virtual-stage order (virtual stage v = chunk x pp
  /// + rank); empty: an even split. Virtual stage 0 also holds the embedding, the last the final norm,
  /// LM head and loss (as Megatron-LM places them).
  std::vector<int> pipeline_layers;
  /// Point-to-point transfers between stages overlap compute (Megatron-LM's overlap_p2p_comm, on by
  /// default with the interleaved schedule); false: the compute stream waits for each send.
  bool p2p_overlap = false;
  int micro_batch = 1;
  int global_batch = 1;
  std::int64_t seq_len = 0;
  common::DType dtype = common::DType::bf16;
  bool sequence_parallel = false;
  const Strategy* strategy = &default_strategy();  ///< a registry entry (never null)
  int row_slices = 1;
  RowAxis row_axis = RowAxis::batch;
  int col_slices = 1;
  int num_splits = 1;  ///< te-pipelined: token chunks of out-proj / FC2 and their ReduceScatters (TE's num_splits)
  int num_sm = 0;      ///< te-pipelined: SMs of each chunk's ReduceScatter (TE's num_sm); 0: not used
  /// none / domino: NCCL channels (one CTA on one SM each) of the tensor-parallel communicator,
  /// as ncclConfig_t.minCTAs = maxCTAs set them (Megatron-LM: --nccl-communicator-config-path,
  /// min_ctas / max_ctas of the tp group); 0: NCCL's own choice
  int tp_channels = 0;
  int te_bulk_sms = 0;  ///< te-bulk: SMs of each bulk AllGather / ReduceScatter (TE's num_sm of the bulk sites); 0: not used
  double dp_bucket_mb = 25.0;  ///< PyTorch DDP's default bucket size
  hardware::Stack stack = hardware::Stack::eager;
  // ---- memory savers (sim/recompute.hpp, sim/builder.hpp, sim/memory.hpp)
  Recompute recompute = Recompute::none;  ///< Megatron-LM --recompute-granularity (none: the flag absent)
  RecomputeMethod recompute_method = RecomputeMethod::uniform;  ///< --recompute-method (full only)
  int recompute_layers = 1;  ///< --recompute-num-layers (full only): layers per chunk (uniform) or recomputed (block)
  int zero = 0;              ///< ZeRO stage 0..3 (1 = Megatron-LM --use-distributed-optimizer)
  bool overlap_grad_reduce = true;   ///< reduce gradient buckets during the backward (--overlap-grad-reduce; DDP's default)
  bool overlap_param_gather = true;  ///< ZeRO 1/2: gather the updated parameters during the next forward (--overlap-param-gather)
  hardware::AttentionKernel attention = hardware::AttentionKernel::flash;  ///< the plan's `attention` key, else stack_attention
  /// The kernel the plan's stack runs on the cluster it was resolved for (default_attention): what
  /// a plan without an `attention` key gets. describe() and plan_to_yaml name `attention` only
  /// where it differs from this.
  hardware::AttentionKernel stack_attention = hardware::AttentionKernel::flash;

  /// Whether the layers run as a SUMMA grid (2D or 2.5D) rather than Megatron-LM's 1D split.
  bool grid_tp() const { return tp_layout != TpLayout::one_d; }
  /// What divides the width of a weight, activation or head count on one rank: tp under 1D, q on a grid.
  int tp_width() const { return grid_tp() ? tp_q : tp; }
  /// What divides the micro-batch's sequences on one rank: 1 under 1D, q x d on a grid (the grid's
  /// rows and its depth each take a share of the batch).
  int tp_rows() const { return grid_tp() ? tp_q * tp_d : 1; }
  /// @brief A rank's place on the 2D / 2.5D grid (tp rank = column + q x row + q^2 x depth in the
  /// row order, row + q x column + q^2 x depth in the column order; sim/builder_grid.cpp).
  struct GridCoord {
    int row = 0, col = 0, depth = 0;
  };
  GridCoord grid_coord(int tp_rank) const {
    const int q = tp_q, fast = tp_rank % q, slow = (tp_rank / q) % q, depth = tp_rank / (q * q);
    return tp_grid_order == TpGridOrder::row ? GridCoord{slow, fast, depth} : GridCoord{fast, slow, depth};
  }
  /// Micro-batches of a step per data-parallel rank (with pp > 1: per pipeline).
  int grad_accum_steps() const { return static_cast<int>(global_batch / (std::int64_t{micro_batch} * dp)); }
  std::int64_t gpus() const { return std::int64_t{tp} * dp * pp; }
  bool shards_optimizer() const { return zero >= 1; }  ///< fp32 master weights and Adam moments: 1/dp per rank
  bool shards_gradients() const { return zero >= 2; }  ///< fp32 gradients: 1/dp per rank (reduce-scattered every micro-batch)
  bool shards_weights() const { return zero >= 3; }    ///< parameters: 1/dp per rank, gathered per layer when used
  /// Virtual pipeline stages: pp x vp.
  int virtual_stages() const { return pp * vp; }
  bool operator==(const Plan&) const = default;
};

/// @brief What the user gave (YAML file and/or flags); unset fields are resolved by resolve_plan.
struct PlanInput {
  std::optional<TpLayout> tp_layout;
  std::optional<int> tp_q, tp_d;
  std::optional<TpGridOrder> tp_grid_order;
  std::optional<int> tp, dp, pp, vp, micro_batch, global_batch, row_slices, col_slices, num_splits, num_sm, tp_channels, te_bulk_sms;
  std::optional<PipelineSchedule> schedule;
  std::optional<std::vector<int>> pipeline_layers;
  std::optional<bool> p2p_overlap;
  std::optional<std::int64_t> seq_len;
  std::optional<common::DType> dtype;
  std::optional<bool> sequence_parallel;
  std::optional<const Strategy*> strategy;
  std::optional<RowAxis> row_axis;
  std::optional<double> dp_bucket_mb;
  std::optional<hardware::Stack> stack;
  std::optional<Recompute> recompute;
  std::optional<RecomputeMethod> recompute_method;
  std::optional<int> recompute_layers, zero;
  std::optional<bool> overlap_grad_reduce, overlap_param_gather;
  std::optional<hardware::AttentionKernel> attention;

  /// Fields set in `over` replace those here (flags over a plan file).
  void merge(const PlanInput& over);
};

/// @brief Why a plan cannot run. The tuner counts refused plans by this.
enum class Infeasibility : std::uint8_t {
  tp_heads, tp_kv_heads, tp_ffn, tp_vocab, tp_node, gpus, global_batch, row_slices_batch,
  row_slices_sequence, col_slices, dtype, memory, pp_layers, strategy, pp_micro_batches, recompute, zero, attention,
  pp_savers, tp_grid,
};
inline constexpr int kInfeasibilityKinds = 20;
std::string_view to_string(Infeasibility r);

struct PlanProblem {
  Infeasibility reason;
  std::string message;  ///< e.g. "heads=40 is not divisible by tp=16"
  std::string key;      ///< the plan key to change
};

/// @brief Divisibility and shape checks (not memory; see estimate_memory). Cheap: the tuner calls it
/// for every candidate. The first problem of check_plan_shapes, else of check_plan_savers.
std::optional<PlanProblem> check_plan(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p);
/// @brief check_plan's checks of everything but the memory savers and the kernel: they read no
/// ZeRO stage, recompute setting or bucket size, so plans differing only in those pass or fail them
/// alike, with the same message (the tuner checks one plan of each enumerated block). `message`
/// false: the reason only (message and key empty; the strategy's own check still words its reason).
std::optional<PlanProblem> check_plan_shapes(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, bool message = true);
/// @brief The rest of check_plan: ZeRO stage (and ZeRO-2/3 with pipelines), recompute settings, the
/// attention kernel and dtype on the GPU. `message` false: the reason only (message and key empty).
std::optional<PlanProblem> check_plan_savers(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, bool message = true);

/// @brief The defaults of resolve_plan without its feasibility checks (positive sizes only): for
/// tools that judge a plan by other rules (bridge::check) before slicetune's own.
Plan fill_plan(const ModelSpec& m, const hardware::ClusterSpec& c, const PlanInput& in, const std::string& source = "plan");

/// @brief Fills unset fields (dp = GPUs / tp, global_batch = micro_batch x dp, seq_len = the
/// model's, each knob its strategy's default or else its neutral value, ...) and checks the result; throws
/// common::ConfigError naming `source`, the key and the reason when infeasible.
Plan resolve_plan(const ModelSpec& m, const hardware::ClusterSpec& c, const PlanInput& in,
                  const std::string& source = "plan");

/// @brief Reads a plan YAML file (keys as in Plan, knobs as the registry declares them); unknown keys are refused.
PlanInput load_plan_input(const std::string& path);
PlanInput parse_plan_input(const std::string& yaml_text, const std::string& source);

/// @brief The plan as YAML that load_plan_input reads back to the same Plan.
std::string plan_to_yaml(const Plan& p, const std::string& comment = "");
/// @brief Short one-line description: "tp8 dp1 mb16 domino 2x1", "tp4 dp2 mb4 sp megatron",
/// "tp8 dp2 pp8 vp2 mb1 sp megatron" (pp, vp and an explicit split only when pipelined),
/// then the memory savers that are on: "zero1", "rc-sel", "rc-full" (with "/4u" or "/20b" when
/// full recompute is not uniform over single layers), and the attention kernel ("flash", "unfused",
/// "unfused_compiled") when it is not the stack's (Plan::stack_attention).
std::string describe(const Plan& p);
/// @brief The attention kernels `cluster`'s GPU runs at `dtype`: flash attention needs bf16 / fp16
/// activations on a GPU (FlashAttention-2/3 have no fp32 kernels; fp8 GEMMs keep bf16 activations);
/// the CPU backend's tiled kernel and the unfused kernel run any dtype. A one-line reason when not.
std::optional<std::string> attention_unsupported(const hardware::ClusterSpec& c, hardware::AttentionKernel k, common::DType dtype);
/// @brief The attention kernel a plan without an `attention` key runs: its stack's
/// (host.stacks.<stack>.attention), or unfused where that is flash and flash cannot run the dtype.
hardware::AttentionKernel default_attention(const hardware::ClusterSpec& c, hardware::Stack stack, common::DType dtype);
/// @brief The kernels the tuner and the savers table try for a plan whose stack runs `own`: `own`
/// first, then flash (or unfused when `own` is flash) - the choice between keeping the score matrix
/// in memory and not.
std::array<hardware::AttentionKernel, 2> attention_choices(hardware::AttentionKernel own);

}  // namespace sim
