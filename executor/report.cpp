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
  return {{"backend", backend},
          {"model", t.model.name},
          {"cluster", t.cluster.name},
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
