// Strategy fused: FLUX's tile-level fusion of the tensor-parallel collectives into the GEMMs
// (bytedance/flux, read at 19831ca; Chang et al. 2024, "FLUX: Fast Software-based Communication
// Overlap On GPUs Through Kernel Fusion"). Under sequence parallelism every TP site becomes one of
// FLUX's two ops, one kernel each:
//  - AllGather + GEMM (AGKernel: QKV and FC1 forward, the out-proj and FC2 input-gradient GEMMs on
//    the gathered output gradient): the peers' [T / tp, K] shards copied on FLUX's copy stream
//    (src/ag_gemm/ths_op/all_gather_gemm_op.cc:114, 272-274), each signalled when it lands; the
//    GEMM's tiles of a shard's rows wait for that signal;
//  - GEMM + ReduceScatter (GemmRS: out-proj and FC2 forward, the QKV and FC1 input-gradient GEMMs):
//    on sm80 the epilogue stores each tile of a peer's rows into that peer's buffer; on sm90 the
//    epilogue stores locally and flags each tile, and the kernel's fetch warps pull the peers'
//    tiles of this rank's rows (src/gemm_rs/sm90_reduce_scatter_utils.hpp); then a local reduction
//    of the tp partials (GemmRS's default fuse_reduction=False, python/flux/cpp_mod.pyi:323;
//    local_reduction, src/gemm_rs/ths_op/gemm_reduce_scatter.cc:782).
// Weight-gradient GEMMs stay plain, and so do the LM head's and the embedding's collectives
// (Megatron-LM's own layers); the schedule is Megatron-LM's (strategy none).
//
// "Signalled per tile" in the step graph (sim/builder.cpp, fused_gathered_gemm and
// fused_reduced_gemm): the kernel is a sequence of tile-row chunks on the compute stream - a shard's
// rows (AllGather), a peer's rows (ReduceScatter; on Hopper cut further to about one wave of tiles
// each) - and its transfers are tasks on a stream of their own (fused_comm) that depend on the chunk
// they carry, or that the chunk depends on. The chunks are priced as their share of the whole
// kernel (sim::FusedPiece::gemm: no launch, kernel latency, wave tail or op overhead of their own),
// the transfers at the rates of hardware::tp_gemm_fused (copy engines, the NVLink port, the
// fitted pull rate), holding no SMs; the engine's interference model slows both through HBM as
// tp_gemm_fused does. tests/strategy/test_strategy_fused.cpp checks that one site simulated alone
// agrees with tp_gemm_fused on FLUX's published shapes.
//
// What FLUX needs (Strategy::check), with its sources:
//  - sequence parallelism: FLUX's ops take the sequence-sharded input and return the sequence-
//    sharded output (all_gather_gemm_op.cc:260: "int M = input.size(0) * this->world_size";
//    gemm_reduce_scatter.cc:781: the output viewed as {world_size, m / world_size, n}); without it the
//    TP collectives are AllReduces, which FLUX does not fuse;
//  - tp > 1;
//  - on GPUs: sm80 or sm90 (src/generator/gen_ag_gemm.cc:30, 113 and gen_gemm_rs.cc:33, 143
//    generate the kernels for _Sm80, _Sm89 and _Sm90 only: nothing for Blackwell); fp16 or bf16 (the
//    same lines' make_gemm_dtype_config(_FP16 / _BF16); their fp8 kernels are sm89's only,
//    gen_ag_gemm.cc:54-60, gen_gemm_rs.cc:68-74; int8 is not a plan
//    dtype); the TP group inside one node, whose kernels are modelled (hardware::tp_gemm_fused:
//    FLUX's intra-node kernels over NVLink; its inter-node variants - GemmRS with nnodes > 1
//    (_InterNode, gen_gemm_rs.cc:42, 152), GemmRSInterNode, AGKernelInterNode (cpp_mod.pyi:388,
//    485; AGKernelInterNode on NVSHMEM buffers and a NCCL communicator,
//    src/ag_gemm/ths_op/all_gather_gemm_op_internode.cc:44-61, 205) - have data paths of their own
//    that are not modelled, so such plans
//    are refused rather than priced as something they are not); on Hopper the fitted pull rate.
//  - the CPU cluster (cpu-host) has no FLUX: the strategy is accepted there so that the CPU
//    backend runs the same decomposition for real (MPI point-to-point, executor/tp_pieces.hpp) and
//    its losses can be checked against none; the simulator then prices each piece as that backend
//    runs it (a GEMM call each, MPI exchanges), not as FLUX's kernel.
#include <fmt/format.h>

#include "sim/builder.hpp"
#include "sim/strategy.hpp"

namespace sim {

namespace {

std::optional<std::string> check(const ModelSpec&, const hardware::ClusterSpec& c, const Plan& p) {
  if (p.tp == 1) return std::string("tp=1 has no tensor-parallel collectives for FLUX to fuse");
  if (!p.sequence_parallel)
    return std::string(
        "FLUX fuses the sequence-parallel AllGather + GEMM and GEMM + ReduceScatter (its ops take and return sequence shards, "
        "all_gather_gemm_op.cc, gemm_reduce_scatter.cc); without sequence parallelism there are only AllReduces; add "
        "--sequence-parallel");
  const auto arch = c.gpu.arch;
  if (arch == hardware::GpuArch::cpu) return std::nullopt;  // the CPU backend's MPI pieces: no GPU rule applies
  if (arch != hardware::GpuArch::ampere && arch != hardware::GpuArch::hopper)
    return fmt::format(
        "{} is {}: FLUX builds its AllGather + GEMM and GEMM + ReduceScatter kernels for sm80, sm89 and sm90 only "
        "(bytedance/flux src/generator/gen_ag_gemm.cc, gen_gemm_rs.cc)",
        c.gpu.name, hardware::to_string(arch));
  if (p.dtype != common::DType::bf16 && p.dtype != common::DType::fp16)
    return fmt::format(
        "dtype={}: FLUX's sm80 / sm90 AllGather + GEMM and GEMM + ReduceScatter kernels are generated for fp16 and bf16 only "
        "(gen_ag_gemm.cc, gen_gemm_rs.cc; its fp8 kernels are sm89's)",
        common::to_string(p.dtype));
  if (p.tp > c.node.gpus_per_node)
    return fmt::format(
        "tp={} spans {} nodes of {} GPUs: only FLUX's intra-node kernels are modelled (peers' buffers over NVLink, "
        "hardware/tp_overlap.hpp); its inter-node GEMM + ReduceScatter and AllGather kernels are not",
        p.tp, (p.tp + c.node.gpus_per_node - 1) / c.node.gpus_per_node, c.node.gpus_per_node);
  if (arch == hardware::GpuArch::hopper && !c.gpu.fused_rs_pull_bytes_per_s)
    return fmt::format(
        "{}: gpu.fused_rs_pull_gb_per_s is missing: FLUX's sm90 GEMM + ReduceScatter pulls its tiles at that rate "
        "(dgx-h100 holds the fitted one)",
        c.source);
  return std::nullopt;
}

}  // namespace

const Strategy& strategy_fused() {
  static const Strategy s{
      .name = "fused",
      .description = "FLUX: AllGather + GEMM and GEMM + ReduceScatter fused into one kernel per site, communication signalled "
                     "per tile (copy engines, the epilogue's stores or the kernel's own pull)",
      .knobs = {},
      .baseline = false,
      .searched = true,
      .issues_builder_pieces = true,
      .describe = [](const Plan&) { return std::string("fused"); },
      .check = check,
      .schedule = [](Builder& b) { strategy_none().schedule(b); },  // Megatron-LM's order; the builder fuses the sites (tp_overlap)
      .tp_overlap = [](const Plan&) { return TpOverlap{.fused = true}; },
  };
  return s;
}

}  // namespace sim
