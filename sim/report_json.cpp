#include "sim/report_json.hpp"

#include <fmt/format.h>

#include "common/table.hpp"
#include "sim/strategy.hpp"

namespace sim {

nlohmann::json plan_json(const Plan& p) {
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
                      {"stack", hardware::to_string(p.stack)}};
  for (const Knob* k : plan_knobs()) {
    const int v = k->get(p);
    if (k->choices.empty()) j[std::string(k->key)] = v;
    else j[std::string(k->key)] = k->format(v);
  }
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
          {"memory",
           {{"weights_gb", r.memory.weights / 1e9},
            {"gradients_gb", r.memory.gradients / 1e9},
            {"optimizer_gb", r.memory.optimizer / 1e9},
            {"activations_gb", r.memory.activations / 1e9},
            {"capacity_gb", t.cluster.gpu.hbm_capacity_bytes / 1e9}}},
          {"tasks", r.tasks}};
  add_stream_times(j, r);
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
    if (s.kind == StreamKind::comm) tab.row({stream_label(s.name), ms(s.busy), "ms"});
  tab.row({"exposed communication", ms(r.exposed_comm), "ms"});
  tab.row({"exposed communication share", pct(r.exposed_comm), "% of step"});
  tab.row({"idle (launch-bound / waiting)", ms(r.idle), "ms"});
  tab.row({"throughput", fmt::format("{:.0f}", r.tokens_per_s), "tokens/s"});
  tab.row({"MFU", fmt::format("{:.1f}", 100.0 * r.mfu), "%"});
  tab.row({"model FLOPs per step", fmt::format("{:.4g}", r.model_flops), "FLOP"});
  tab.row({"memory per GPU", fmt::format("{:.1f}", r.memory.total() / 1e9), "GB"});
  tab.row({"  weights + grads + optimizer", fmt::format("{:.1f}", (r.memory.weights + r.memory.gradients + r.memory.optimizer) / 1e9), "GB"});
  tab.row({"  activations", fmt::format("{:.1f}", r.memory.activations / 1e9), "GB"});
  tab.row({"GPU capacity", fmt::format("{:.0f}", t.cluster.gpu.hbm_capacity_bytes / 1e9), "GB"});
  tab.row({"tasks per rank graph", fmt::format("{}", r.tasks), ""});
  return tab.str();
}

}  // namespace sim
