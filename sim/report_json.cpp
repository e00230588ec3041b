#include "sim/report_json.hpp"

#include <fmt/format.h>

#include "common/table.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/shapes.hpp"
#include "sim/strategy.hpp"

namespace sim {

nlohmann::json plan_json(const Plan& p) {
  nlohmann::json pipe;
  if (p.pp > 1)
    pipe = {{"vp", p.vp}, {"schedule", to_string(p.schedule)}, {"pipeline_layers", p.pipeline_layers}, {"p2p_overlap", p.p2p_overlap}};
  nlohmann::json j = {{"tp", p.tp},
                      {"dp", p.dp},
                      {"pp", p.pp},
                      {"micro_batch", p.micro_batch},
                      {"global_batch", p.global_batch},
                      {"grad_accum_steps", p.grad_accum_steps()},
                      {"seq_len", p.seq_len},
                      {"dtype", common::to_string(p.dtype)},
                      {"sequence_parallel", p.sequence_parallel},
                      {"strategy", p.strategy->name},
                      {"dp_bucket_mb", p.dp_bucket_mb},
                      {"stack", hardware::to_string(p.stack)},
                      {"recompute", to_string(p.recompute)},
                      {"recompute_method", to_string(p.recompute_method)},
                      {"recompute_layers", p.recompute_layers},
                      {"zero", p.zero},
                      {"overlap_grad_reduce", p.overlap_grad_reduce},
                      {"overlap_param_gather", p.overlap_param_gather},
                      {"attention", hardware::to_string(p.attention)}};
  for (const Knob* k : plan_knobs()) {
    const int v = k->get(p);
    if (k->choices.empty()) j[std::string(k->key)] = v;
    else j[std::string(k->key)] = k->format(v);
  }
  if (p.pp > 1) j.update(pipe);  // pipeline keys only when pipelined: unpipelined plans print as before
  if (p.grid_tp())                 // grid keys only on a 2D / 2.5D grid: 1D plans print as before
    j.update({{"tp_layout", to_string(p.tp_layout)}, {"tp_q", p.tp_q}, {"tp_d", p.tp_d}, {"tp_grid_order", to_string(p.tp_grid_order)}});
  return j;
}

void add_stream_times(nlohmann::json& j, const StepReport& r) {
  for (const auto& s : r.streams)
    if (s.kind == StreamKind::comm) j[s.name + "_ms"] = s.busy.ms();
}

std::optional<PredictionRange> range_for(const Plan& plan, const hardware::ClusterSpec& cluster, const std::string& cost_model, common::Duration step) {
  if (cost_model != "analytic" || cluster.gpu.arch == hardware::GpuArch::cpu) return std::nullopt;
  return prediction_range(plan, cluster, step);
}

nlohmann::json report_json(const Target& t, const StepReport& r, const std::string& cost_model, const std::optional<PredictionRange>& range) {
  nlohmann::json j = {{"model", t.model.name},
          {"cluster", t.cluster.name},
          {"nodes", t.cluster.nodes},
          {"gpus", t.cluster.total_gpus()},
          {"cost_model", cost_model},
          {"plan", plan_json(t.plan)},
          {"step_time_ms", r.step_time.ms()},
          {"micro_batch_time_ms", r.micro_batch_time.ms()},
          {"compute_ms", r.compute.ms()},
          {"exposed_comm_ms", r.exposed_comm.ms()},
          {"idle_ms", r.idle.ms()},
          {"mfu", r.mfu},
          {"tokens_per_s", r.tokens_per_s},
          {"model_flops", r.model_flops},
          {"memory_gb", r.memory.total() / 1e9},
          {"memory", memory_json(r.memory)},
          {"tasks", r.tasks}};
  add_stream_times(j, r);
  if (t.plan.pp > 1) {
    const auto ps = pipeline_summary(t.model, t.plan, r);
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& st : ps.stages)
      stages.push_back({{"stage", st.stage},
                        {"layers", st.layers},
                        {"compute_ms", st.compute.ms()},
                        {"idle_ms", st.idle.ms()},
                        {"exposed_comm_ms", st.exposed_comm.ms()},
                        {"pp_comm_ms", st.pp_comm.ms()},
                        {"bubble", st.bubble},
                        {"memory_gb", st.memory.total() / 1e9},
                        {"activations_gb", st.memory.activations / 1e9}});
    j["pipeline"] = {{"micro_batches", t.plan.grad_accum_steps()},
                     {"mean_bubble", ps.mean_bubble},
                     {"worst_memory_stage", ps.worst_memory_stage},
                     {"stages", stages}};
  }
  if (range) {
    j["step_time_range_ms"] = {range->low.ms(), range->high.ms()};
    j["step_time_range_basis"] = fmt::format("out-of-sample step error of {} plans, {:+.1f} .. {:+.1f} % (docs/accuracy.md)", range->band->kind,
                                             100 * range->band->low, 100 * range->band->high);
  }
  return j;
}

std::string report_table(const Target& t, const StepReport& r, const std::optional<PredictionRange>& range) {
  common::Table tab({"quantity", "value", "unit"}, {});
  auto ms = [](common::Duration d) { return fmt::format("{:.3f}", d.ms()); };
  const double step = r.step_time.ms();
  auto pct = [step](common::Duration d) { return step > 0 ? fmt::format("{:.1f}", 100.0 * d.ms() / step) : std::string("0"); };
  tab.row({"step time", ms(r.step_time), "ms"});
  if (range)
    tab.row({fmt::format("  range ({} error {:+.0f} .. {:+.0f} %)", range->band->kind, 100 * range->band->low, 100 * range->band->high),
             fmt::format("{:.1f} .. {:.1f}", range->low.ms(), range->high.ms()), "ms"});
  tab.row({"micro-batch time", ms(r.micro_batch_time), "ms"});
  tab.row({"compute (busy)", ms(r.compute), "ms"});
  for (const auto& s : r.streams)
    if (s.kind == StreamKind::comm && !s.name.starts_with("pp_")) tab.row({stream_label(s.name), ms(s.busy), "ms"});
  if (t.plan.pp > 1) tab.row({"PP transfers (stage 0, summed over its streams)", ms(r.busy_prefix("pp_")), "ms"});
  tab.row({"exposed communication", ms(r.exposed_comm), "ms"});
  tab.row({"exposed communication share", pct(r.exposed_comm), "% of step"});
  tab.row({"idle (launch-bound / waiting)", ms(r.idle), "ms"});
  tab.row({"throughput", fmt::format("{:.0f}", r.tokens_per_s), "tokens/s"});
  tab.row({"MFU", fmt::format("{:.1f}", 100.0 * r.mfu), "%"});
  tab.row({"model FLOPs per step", fmt::format("{:.4g}", r.model_flops), "FLOP"});
  std::optional<PipelineSummary> ps;
  if (t.plan.pp > 1) {
    ps = pipeline_summary(t.model, t.plan, r);
    tab.row({"pipeline bubble (compute idle, mean of stages)", fmt::format("{:.1f}", 100.0 * ps->mean_bubble), "% of step"});
  }
  tab.row({ps ? fmt::format("memory per GPU (worst: stage {}; breakdown below)", ps->worst_memory_stage) : std::string("memory per GPU (breakdown below)"),
           fmt::format("{:.1f}", r.memory.total() / 1e9), "GB"});
  tab.row({"GPU capacity", fmt::format("{:.0f}", t.cluster.gpu.hbm_capacity_bytes / 1e9), "GB"});
  tab.row({ps ? "tasks per rank graph (stage 0)" : "tasks per rank graph", fmt::format("{}", r.tasks), ""});
  if (!ps) return tab.str();
  common::Table st({"stage", "layers", "compute", "idle", "bubble", "PP transfers", "exposed comm", "memory", "activations"},
                   {"", "", "ms", "ms", "% of step", "ms", "ms", "GB", "GB"});
  for (const auto& s : ps->stages)
    st.row({fmt::format("{}", s.stage), fmt::format("{}", s.layers), ms(s.compute), ms(s.idle), fmt::format("{:.1f}", 100.0 * s.bubble),
            ms(s.pp_comm), ms(s.exposed_comm), fmt::format("{:.1f}", s.memory.total() / 1e9), fmt::format("{:.1f}", s.memory.activations / 1e9)});
  return tab.str() + "\n" + st.str();
}

nlohmann::json memory_json(const MemoryEstimate& m) {
  return {{"weights_gb", m.weights / 1e9},
          {"gathered_weights_gb", m.gathered_weights / 1e9},
          {"gradients_gb", m.gradients / 1e9},
          {"optimizer_gb", m.optimizer / 1e9},
          {"activations_gb", m.activations / 1e9},
          {"recomputed_gb", m.recomputed / 1e9},
          {"temporaries_gb", m.temporaries / 1e9},
          {"dp_buckets_gb", m.dp_buckets / 1e9},
          {"nccl_gb", m.nccl / 1e9},
          {"cuda_context_gb", m.cuda_context / 1e9},
          {"total_gb", m.total() / 1e9},
          {"reserve_fraction", m.reserve_fraction},
          {"reserve_gb", m.reserve() / 1e9},
          {"usable_gb", m.usable() / 1e9},
          {"capacity_gb", m.capacity / 1e9},
          {"fits", m.fits()},
          {"over_gb", m.over() / 1e9}};
}

std::string memory_table(const Plan& p, const MemoryEstimate& m) {
  common::Table tab({"memory per GPU", "size", "what"}, {"", "GB", ""});
  auto gb = [](double b) { return fmt::format("{:.2f}", b / 1e9); };
  const std::string dt(common::to_string(activation_dtype(p.dtype)));
  const bool zero = p.dp > 1 && p.zero > 0;
  const std::string over_dp = fmt::format(" / dp {}", p.dp);
  tab.row({"weights", gb(m.weights), dt + " parameters" + (zero && p.shards_weights() ? over_dp + " (ZeRO-3 shard)" : "")});
  tab.row({"gathered weights", gb(m.gathered_weights), p.shards_weights() && p.dp > 1 ? "ZeRO-3: root unit + two layers gathered" : "-"});
  tab.row({"gradients", gb(m.gradients), "fp32" + std::string(zero && p.shards_gradients() ? over_dp + " (ZeRO-2/3 shard)" : "")});
  tab.row({"optimizer state", gb(m.optimizer),
           std::string(activation_dtype(p.dtype) == common::DType::fp32 ? "Adam m, v" : "fp32 master + Adam m, v") +
               (zero ? over_dp + " (ZeRO shard)" : "")});
  std::string act = p.pp > 1 ? fmt::format("saved for the backward, the stage's peak in-flight micro-batches of {} x {}", p.micro_batch, p.seq_len)
                             : fmt::format("saved for the backward, 1 micro-batch of {} x {}", p.micro_batch, p.seq_len);
  if (p.recompute != Recompute::none) act += fmt::format(", recompute {}", to_string(p.recompute));
  if (p.sequence_parallel) act += ", sequence parallel";
  act += fmt::format(", {} attention", hardware::to_string(p.attention));
  tab.row({"activations", gb(m.activations), act});
  tab.row({"recomputed activations", gb(m.recomputed),
           p.recompute == Recompute::full ? "one checkpointed chunk during its backward"
           : p.recompute == Recompute::selective ? "one attention's recomputed output during its backward" : "-"});
  tab.row({"temporary buffers", gb(m.temporaries), "the largest op's transient tensors"});
  tab.row({"DP buckets", gb(m.dp_buckets), p.zero >= 2 && p.dp > 1 ? "full-size gradient buckets before reduce-scatter (two)" : "views of the gradient buffer"});
  tab.row({"NCCL buffers", gb(m.nccl), "channel buffers of the TP and DP communicators"});
  tab.row({"CUDA context", gb(m.cuda_context), "context, kernels, library workspaces"});
  tab.row({"total", gb(m.total()), ""});
  tab.row({"fragmentation reserve", gb(m.reserve()), fmt::format("{:g} % of {:.0f} GB kept free", 100 * m.reserve_fraction, m.capacity / 1e9)});
  tab.row({"usable", gb(m.usable()), m.fits() ? fmt::format("fits: {:.2f} GB to spare", -m.over() / 1e9)
                                                : fmt::format("does NOT fit: {:.2f} GB over", m.over() / 1e9)});
  return tab.str();
}

}  // namespace sim
