// Strategy te-bulk: TransformerEngine's userbuffers bulk overlap (method "bulk"), the overlaps of
// the backward's column-parallel layers (LayerNormLinear: QKV, FC1) under sequence parallelism.
// TE's default method per site (transformer_engine/pytorch/module/base.py, initialize_ub) and every
// NeMo preset (data/calibration/te-userbuffers-presets.csv) make these four sites bulk:
//  - qkv_dgrad, fc1_dgrad: the AllGather of the (sequence-sharded) norm output, which only the
//    weight-gradient GEMM needs, runs whole beside the input-gradient GEMM;
//  - qkv_wgrad, fc1_wgrad: the ReduceScatter of the input gradient runs whole beside the
//    weight-gradient GEMM, which therefore does not wait for it (Megatron-LM without overlap does:
//    strategy none).
// Each bulk collective is a userbuffers kernel on num_sm SMs (TE's default 16; the presets give the
// dgrad AllGathers 2-16 SMs and the wgrad ReduceScatters 2-32), launched by the GEMM call it
// overlaps. Knob te_bulk_sms is that num_sm for all four sites; the SMs it holds slow the GEMM
// beside it (the engine's interference model, as te-pipelined's num_sm), fewer SMs than NCCL's
// channels move the bytes proportionally slower (sim::CostTable::on_sms).
// Every other collective keeps Megatron-LM's schedule: this is the bulk method alone, so the
// difference to none is the four backward sites. (Megatron-LM's --tp-comm-overlap runs bulk and
// te-pipelined's methods together; that combination is not a strategy here.)
//
// What TE and Megatron-LM refuse is te-pipelined's (check_te_userbuffers: sequence parallelism,
// tp > 1, on GPUs the TP group inside one NVLink node), plus CPU clusters (the CPU backend runs
// te-pipelined's pieces, not this) and num_sm below one or leaving no SMs.
#include <fmt/format.h>

#include "sim/builder.hpp"
#include "sim/strategy.hpp"

namespace sim {

namespace {

std::optional<std::string> check(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) {
  if (auto why = check_te_userbuffers(m, c, p)) return why;
  // the CPU backend runs te-pipelined's pieces with MPI, not this: bulk overlap is SM kernels beside a GEMM
  if (c.gpu.arch == hardware::GpuArch::cpu)
    return std::string("TE's bulk overlap needs CUDA GPUs (userbuffers kernels on SMs beside the GEMM; the CPU backend does not run it)");
  if (p.te_bulk_sms < 1) return fmt::format("te_bulk_sms={}: TE's bulk AllGather / ReduceScatter kernels need at least one SM", p.te_bulk_sms);
  if (p.te_bulk_sms >= c.gpu.sm_count)
    return fmt::format("te_bulk_sms={} leaves no SMs to the GEMMs of {} ({} SMs)", p.te_bulk_sms, c.gpu.name, c.gpu.sm_count);
  return std::nullopt;
}

/// Megatron-LM's order (strategy none), except that the QKV and FC1 weight-gradient GEMMs do not
/// wait for their input gradient's ReduceScatter: TE runs that ReduceScatter beside them (the
/// builder emits the bulk collectives: TpOverlap::bulk_sms). The LM head keeps none's ordering.
void schedule(Builder& b) { schedule_megatron(b, /*layer_wgrad_waits=*/false); }

}  // namespace

const Strategy& strategy_te_bulk() {
  static const Strategy s{
      .name = "te-bulk",
      .description =
          "TransformerEngine userbuffers' bulk overlap: the backward's AllGather beside the input-gradient GEMM and "
          "ReduceScatter beside the weight-gradient GEMM, on te_bulk_sms SMs",
      .knobs =
          {
              Knob{.key = "te_bulk_sms",
                   .flag = "--te-bulk-sms",
                   .help = "te-bulk: SMs of each bulk AllGather / ReduceScatter (TE's num_sm, default 16)",
                   .min = 0,  // 0 is the neutral value other strategies' plan files carry; check refuses it here
                   .max = 256,
                   .neutral = 0,
                   .default_value = 16,         // TE initialize_ub: "num_sm": 16 unless ring_exchange
                   .searched = {4, 8, 16, 32},  // NeMo's bulk presets (te-userbuffers-presets.csv) give 2 to 32
                   .get = [](const Plan& p) { return p.te_bulk_sms; },
                   .set = [](Plan& p, int v) { p.te_bulk_sms = v; },
                   .get_input = [](const PlanInput& in) { return in.te_bulk_sms; },
                   .set_input = [](PlanInput& in, int v) { in.te_bulk_sms = v; }},
          },
      .baseline = false,
      .searched = true,
      .issues_builder_pieces = true,
      .describe = [](const Plan& p) { return fmt::format("te-bulk {}sm", p.te_bulk_sms); },
      .check = check,
      .schedule = schedule,
      .tp_overlap = [](const Plan& p) { return TpOverlap{.bulk_sms = p.te_bulk_sms}; },
      .not_executed = "the executor runs column chunks only (issue 14: TE's bulk overlap on the executor is not built)",
  };
  return s;
}

}  // namespace sim
