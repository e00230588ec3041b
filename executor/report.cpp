#include "executor/report.hpp"

#include <fmt/format.h>

#include "sim/report_json.hpp"

namespace executor {

nlohmann::json run_json(const sim::Target& t, const sim::StepGraph& g, const RunResult& r, const std::string& backend, int ranks) {
  nlohmann::json tasks = nlohmann::json::array();
  const auto& tl = r.timelines.empty() ? std::vector<TaskClock>(g.size()) : r.timelines[0];
  for (std::size_t i = 0; i < g.size(); ++i) {
    nlohmann::json row = {{"name", g.task_name(i)},
                          {"class", g.task_class(i)},
                          {"stream", g.stream_of(i).name},
                          {"median_us", i < r.task_median_us.size() ? r.task_median_us[i] : -1.0}};
    if (tl[i].start_ns >= 0) {
      row["start_us"] = tl[i].start_ns / 1e3;
      row["end_us"] = tl[i].end_ns / 1e3;
    }
    tasks.push_back(std::move(row));
  }
  // how to load the model and cluster again (validate --measured): the embedded name, or the file
  auto ref = [](const std::string& name, const std::string& source) {
    if (!source.ends_with(" (embedded)")) return source;
    const std::string hf = "configs/hf/";  // an embedded config.json is loaded by its path under configs/hf
    return source.rfind(hf, 0) == 0 ? source.substr(hf.size(), source.size() - hf.size() - 11) : name;
  };
  return {{"schema_version", 1},
          {"backend", backend},
          {"model", t.model.name},
          {"model_ref", ref(t.model.name, t.model.source)},
          {"cluster", t.cluster.name},
          {"cluster_ref", ref(t.cluster.name, t.cluster.source)},
          {"ranks", ranks},
          {"plan", sim::plan_json(t.plan)},
          {"steps", r.step_times_ms.size()},
          {"warmup", r.warmup},
          {"step_time_ms", r.step_time_ms},
          {"step_time_min_ms", r.step_time_min_ms},
          {"step_time_max_ms", r.step_time_max_ms},
          {"step_time_stdev_ms", r.step_time_stdev_ms},
          {"step_times_ms", r.step_times_ms},
          {"loss", r.loss},
          {"tokens_per_s", r.tokens_per_s},
          {"overlap", {{"tp_comm_busy_ms", r.overlap.comm_busy_ms},
                       {"tp_comm_overlapped_ms", r.overlap.overlapped_ms},
                       {"tp_comm_overlap_fraction", r.overlap.fraction()}}},
          {"median_step", r.median_step},
          {"tasks", std::move(tasks)}};
}

}  // namespace executor
