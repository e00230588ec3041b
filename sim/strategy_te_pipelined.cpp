// Strategy te-pipelined: TransformerEngine's userbuffers comm+GEMM overlap as Megatron-LM runs it
// with --tp-comm-overlap (NeMo: ub_tp_comm_overlap), with TE's default method per GEMM site
// (transformer_engine/pytorch/module/base.py, initialize_ub: get_default_config):
//  - proj_fprop, fc2_fprop ("pipeline"): the row-parallel GEMM cut into num_splits chunks along the
//    tokens, each chunk's ReduceScatter (SM kernels on num_sm SMs) overlapping the next chunk's GEMM.
//    TE's defaults: num_splits 4, num_sm 16; NeMo's presets (data/calibration/te-userbuffers-presets.csv,
//    from NeMo's tp_overlap_configs/userbuffers.py) keep num_splits 4 and give 8 to 32 SMs;
//  - qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad ("ring_exchange"): the AllGather as tp
//    point-to-point steps, one shard per step, each overlapping the GEMM on the shard before it.
//    TE's defaults: num_splits = tp, 1 SM, use_ce (copy engines) - TE refuses "pipeline" for an
//    AllGather ("`pipeline` overlap method is not supported for AllGather"), so the chunk count of
//    these sites is tp, not num_splits.
// The bulk overlaps of qkv/fc1 dgrad and wgrad (TE's "bulk" method) are te-bulk's
// (sim/strategy_te_bulk.cpp): here the other collectives keep Megatron-LM's schedule (strategy
// none), so the difference to none is the pipelined sites alone.
//
// What TE and Megatron-LM refuse (Strategy::check): Megatron-LM's arguments.py asserts
// "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is
// enabled", and turns sequence parallelism off at tp 1; TE's comm_gemm_overlap example
// (examples/pytorch/comm_gemm_overlap/README.md) requires "Tensor-parallel GPUs must be on a single
// node, and connected over NVLink/NVSwitch" - userbuffers map the peers' buffers with CUDA IPC or
// multicast handles, which do not cross nodes.
#include <fmt/format.h>

#include "sim/builder.hpp"
#include "sim/strategy.hpp"

namespace sim {

namespace {

std::optional<std::string> check(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) {
  if (auto why = check_te_userbuffers(m, c, p)) return why;
  if (p.num_sm < 1) return fmt::format("num_sm={}: TE's ReduceScatter kernels need at least one SM", p.num_sm);
  if (c.gpu.arch != hardware::GpuArch::cpu && p.num_sm >= c.gpu.sm_count)
    return fmt::format("num_sm={} leaves no SMs to the GEMMs of {} ({} SMs)", p.num_sm, c.gpu.name, c.gpu.sm_count);
  // each chunk's ReduceScatter leaves every rank whole rows of it
  const std::int64_t tokens = std::int64_t{p.micro_batch} * p.seq_len;
  if (tokens % (std::int64_t{p.num_splits} * p.tp))
    return fmt::format("micro_batch x seq_len = {} tokens do not split into num_splits x tp = {} x {} chunks of whole rows",
                       tokens, p.num_splits, p.tp);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_te_userbuffers(const ModelSpec&, const hardware::ClusterSpec& c, const Plan& p) {
  if (p.tp == 1) return std::string("tp=1 has no tensor-parallel communication for TE's userbuffers to overlap");
  if (!p.sequence_parallel)
    return std::string(
        "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled (Megatron-LM's check "
        "of --tp-comm-overlap); add --sequence-parallel");
  // The CPU backend runs the same pieces with MPI (chunk ReduceScatters as non-blocking
  // collectives, ring steps point-to-point, executor/tp_pieces.hpp) on its communication thread:
  // no userbuffers to map within a node and no SMs to share, so the GPU rules below do not apply
  const bool gpu = c.gpu.arch != hardware::GpuArch::cpu;
  if (gpu && p.tp > c.node.gpus_per_node)
    return fmt::format(
        "tp={} spans {} nodes of {} GPUs: TE's userbuffers need the tensor-parallel GPUs on a single node, connected over "
        "NVLink/NVSwitch "
        "(CUDA IPC / multicast handles do not cross nodes)",
        p.tp, (p.tp + c.node.gpus_per_node - 1) / c.node.gpus_per_node, c.node.gpus_per_node);
  return std::nullopt;
}

const Strategy& strategy_te_pipelined() {
  static const Strategy s{
      .name = "te-pipelined",
      .description =
          "TransformerEngine userbuffers: pipelined GEMM + ReduceScatter chunks on num_sm SMs, ring-exchange AllGather + GEMM "
          "by copy engines (Megatron-LM --tp-comm-overlap)",
      .knobs =
          {
              Knob{.key = "num_splits",
                   .flag = "--num-splits",
                   .help = "te-pipelined: chunks of out-proj / FC2 and their ReduceScatters (TE's default 4)",
                   .min = 1,
                   .max = 64,
                   .neutral = 1,
                   .default_value = 4,  // TE initialize_ub: "num_splits": 4 for the pipeline method
                   .searched = {2, 4, 8},
                   .get = [](const Plan& p) { return p.num_splits; },
                   .set = [](Plan& p, int v) { p.num_splits = v; },
                   .get_input = [](const PlanInput& in) { return in.num_splits; },
                   .set_input = [](PlanInput& in, int v) { in.num_splits = v; }},
              Knob{.key = "num_sm",
                   .flag = "--num-sm",
                   .help = "te-pipelined: SMs of each chunk's ReduceScatter (TE's default 16)",
                   .min = 0,  // 0 is the neutral value other strategies' plan files carry; check refuses it here
                   .max = 256,
                   .neutral = 0,
                   .default_value = 16,      // TE initialize_ub: "num_sm": 16 unless ring_exchange
                   .searched = {8, 16, 32},  // the range of NeMo's pipeline presets (te-userbuffers-presets.csv: 8, 16, 24, 32)
                   .get = [](const Plan& p) { return p.num_sm; },
                   .set = [](Plan& p, int v) { p.num_sm = v; },
                   .get_input = [](const PlanInput& in) { return in.num_sm; },
                   .set_input = [](PlanInput& in, int v) { in.num_sm = v; }},
          },
      .baseline = false,
      .searched = true,
      .issues_builder_pieces = true,
      .describe = [](const Plan& p) { return fmt::format("te-pipelined {}x{}sm", p.num_splits, p.num_sm); },
      .check = check,
      .schedule =
          [](Builder& b) { strategy_none().schedule(b); },  // Megatron-LM's order; the builder cuts the sites (tp_overlap)
      .tp_overlap = [](const Plan& p) { return TpOverlap{.ag_peer_steps = true, .rs_splits = p.num_splits, .rs_sms = p.num_sm}; },
  };
  return s;
}

}  // namespace sim
