// slicetune validate: predicted (simulator) vs measured (executor) per step and per task class.
#ifdef SLICETUNE_HAVE_EXECUTOR
#include <fmt/format.h>

#include <iostream>

#include "cli/command.hpp"
#include "cli/rank_errors.hpp"
#include "common/limits.hpp"
#include "common/strict_json.hpp"
#include "executor/backend.hpp"
#include "executor/mpi_plugin.hpp"
#include "executor/report.hpp"
#include "validate/compare.hpp"
#include "validate/measured_trace.hpp"
#include "sim/report_json.hpp"
#include "executor/run.hpp"
#include "executor/run_target.hpp"
#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/trace.hpp"

namespace {

namespace mpi_plugin = executor::mpi_plugin;  // MPI and the executor: the MPI plug-in, loaded when a Session starts

struct ValidateFlags {
  cli::TargetFlags target;
  std::string measured, backend = "cpu", trace;
  long long steps = 20, warmup = 2, threads = 1, device = 0;  // range-checked before use
  double watchdog_s = 20;
  bool json = false;
};

/// A measured file's kind: a `slicetune run` JSON, a PyTorch profiler (Kineto) trace or an Nsight Systems SQLite export.
enum class MeasuredKind { run_json, kineto, nsys_sqlite };

MeasuredKind measured_kind(const std::string& path, std::string& text) {
  for (const char* ext : {".sqlite", ".sqlite3", ".db"})
    if (path.ends_with(ext)) return MeasuredKind::nsys_sqlite;
  if (path.ends_with(".nsys-rep") || path.ends_with(".qdrep"))
    throw common::ConfigError(path, "", "an Nsight Systems report: export it first with `nsys export --type sqlite` and give the .sqlite");
  text = common::read_text_file(path);
  if (text.rfind("SQLite format 3", 0) == 0) return MeasuredKind::nsys_sqlite;
  return text.find("\"traceEvents\"") != std::string::npos ? MeasuredKind::kineto : MeasuredKind::run_json;
}

/// The plan, model and cluster a `slicetune run` JSON carries, under the flags given now.
sim::TargetInput input_from_run(const cli::TargetFlags& flags, const std::string& text, const std::string& source) {
  sim::TargetInput in = flags.input();
  nlohmann::json j;
  try {
    j = common::parse_json_strict(text, source, "a `slicetune run --json` output");
  } catch (const common::ConfigError&) {
    return in;  // parse_run_json says what is wrong
  }
  if (!j.is_object() || !j.contains("plan") || !j.at("plan").is_object()) return in;
  for (const char* key : {"model_ref", "cluster_ref"})  // strings, or get<> would throw a type error that is no ConfigError
    if (j.contains(key) && !j.at(key).is_string()) throw common::ConfigError(source, key, fmt::format("expected a string, got {}", j.at(key).dump()));
  if (!flags.cmd->count("--model") && j.contains("model_ref")) in.model = j.at("model_ref").get<std::string>();
  if (!flags.cmd->count("--cluster") && !flags.cmd->count("--profile") && j.contains("cluster_ref")) in.cluster = j.at("cluster_ref").get<std::string>();
  if (!flags.plan.empty()) return in;  // --plan given: it and the flags describe the plan
  nlohmann::json plan = j.at("plan");
  plan.erase("grad_accum_steps");
  sim::PlanInput pi = sim::parse_plan_input(plan.dump(), source + " (plan)");
  pi.merge(in.flags);
  in.flags = pi;
  return in;
}

/// The cost model validate predicts with: analytic for the cluster, or a measured profile (--profile).
std::unique_ptr<hardware::CostModel> cost_model_for(const ValidateFlags& f, const hardware::ClusterSpec& c, hardware::Stack stack) {
  return f.target.cost_model(c, stack);
}

void run_validate(const ValidateFlags& f) {
  if (cli::launcher_rank() == 0) common::check_output_path(f.trace, "--trace");
  validate::MeasuredRun m;
  sim::Target t;
  std::string measured_from;
  std::unique_ptr<mpi_plugin::Session> mpi;
  if (!f.measured.empty()) {
    std::string text;
    const MeasuredKind kind = measured_kind(f.measured, text);
    if (kind != MeasuredKind::run_json) {
      // a real GPU run profiled by PyTorch or Nsight Systems: the plan comes from the flags / --plan / --megatron-args
      const int device = static_cast<int>(cli::int_flag("--device", f.device, 0, common::limits::kMaxGpus - 1));
      const validate::MeasuredTrace trace = kind == MeasuredKind::kineto ? validate::parse_kineto_trace(text, f.measured, device)
                                                                          : validate::read_nsys_sqlite(f.measured, device);
      const sim::Target tt = f.target.resolve();
      auto cost = cost_model_for(f, tt.cluster, tt.plan.stack);
      const auto c = validate::compare_trace(tt, trace, *cost);
      if (f.json) {
        auto j = validate::trace_comparison_json(c);
        j["schema_version"] = cli::kJsonSchemaVersion;
        j["model"] = tt.model.name;
        j["cluster"] = tt.cluster.name;
        j["plan"] = sim::plan_json(tt.plan);
        j["measured"] = f.measured;
        j["format"] = trace.format;
        std::cout << j.dump(2) << "\n";
        return;
      }
      fmt::print("slicetune validate: {} on {}, {} cost model\n", tt.model.name, tt.cluster.name, cost->describe());
      fmt::print("plan ({}): {}; measured: {} ({}, device {}, {} kernels, {} step{})\n", tt.plan_source, sim::describe(tt.plan), f.measured,
                 trace.format, f.device, trace.kernels.size(), c.measured_step_ms.size(), c.measured_step_ms.size() == 1 ? "" : "s");
      fmt::print("per class: summed kernel / task durations per step; error = (predicted - measured) / measured\n\n");
      fmt::print("{}", validate::trace_comparison_table(c));
      return;
    }
    m = validate::parse_run_json(text, f.measured);
    t = executor::resolve_run_target(input_from_run(f.target, text, f.measured), m.ranks);
    if (f.target.plan.empty()) t.plan_source = f.measured;
    measured_from = f.measured;
  } else {
    executor::BackendKind kind;
    if (!executor::parse_backend_kind(f.backend, kind)) cli::bad_flag("--backend", "expected cpu | cuda, got '" + f.backend + "'");
    const int steps = static_cast<int>(cli::int_flag("--steps", f.steps, 1, common::limits::kMaxSteps));
    if (f.warmup < 0 || f.warmup >= steps) cli::bad_flag("--warmup", fmt::format("expected 0 <= warmup < steps = {}", steps));
    const int warmup = static_cast<int>(f.warmup);
    cli::int_flag("--threads", f.threads, 1, common::limits::kMaxThreads);
    cli::number_flag("--watchdog-s", f.watchdog_s, 0, 3600);
    mpi = std::make_unique<mpi_plugin::Session>();  // MPI and the executor: the MPI plug-in, loaded now
    bool rank0 = true;
    cli::on_every_rank(*mpi, [&] {
      t = executor::resolve_run_target(f.target.input(), mpi->size());
      const sim::StepGraph g = sim::build_step_graph(t.model, t.cluster, t.plan, mpi->rank());
      auto backend = mpi_plugin::make_backend(kind, {.world_rank = mpi->rank(), .world_size = mpi->size(), .tp = t.plan.tp, .dp = t.plan.dp,
                                                     .pp = t.plan.pp, .pipeline_wraps = t.plan.vp > 1, .tp_channels = t.plan.tp_channels, .device = -1,
                                                     .cpu_threads = static_cast<int>(f.threads), .watchdog_s = f.watchdog_s});
      if (mpi->rank() == 0) fmt::print(stderr, "validate: running {} steps on {}\n", steps, backend->describe());
      const auto r = mpi_plugin::train(g, *backend, {.steps = steps, .warmup = warmup, .training = {}, .on_step = {}, .watchdog_s = f.watchdog_s});
      rank0 = mpi->rank() == 0;
      if (!rank0) return;
      m = validate::parse_run_json(executor::run_json(t, g, r, backend->describe(), mpi->size()).dump(), "run");
      measured_from = fmt::format("this run ({} steps, {} warm-up, {})", steps, warmup, backend->describe());
    });
    if (!rank0) return;
  }

  auto cost = cost_model_for(f, t.cluster, t.plan.stack);
  const auto result = validate::validate_run(t, m, *cost, f.measured.empty() ? "run" : f.measured);
  const auto& v = result.validation;
  if (!f.trace.empty())
    sim::ChromeTrace().add("predicted", result.predicted).add("measured rank 0", *result.graph, m.timeline).write(f.trace);
  if (f.json) {
    auto j = validate::validation_json(t, v, cost->describe(), measured_from);
    j["schema_version"] = cli::kJsonSchemaVersion;
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("slicetune validate: {} on {}, {} cost model\n", t.model.name, t.cluster.name, cost->describe());
  fmt::print("plan ({}): {}; measured: {}\n", t.plan_source, sim::describe(t.plan), measured_from);
  fmt::print("per class: summed task durations in the step's last micro-batch; error = (predicted - measured) / measured\n\n");
  fmt::print("{}", validate::validation_table(v));
  if (!f.trace.empty()) fmt::print("\ntrace: {} (predicted and measured side by side; https://ui.perfetto.dev)\n", f.trace);
}

const bool registered = cli::register_command(45, "validate", "compare the simulator's prediction of a plan with a measured run", [](CLI::App* cmd) {
  auto flags = std::make_shared<ValidateFlags>();
  flags->target.cluster = "cpu-host";
  cli::add_target_flags(cmd, flags->target, true, cli::executor_defaults_help());
  cmd->add_option("--measured", flags->measured,
                  "a `slicetune run --out` file (its plan is used unless flags say otherwise), a PyTorch profiler Chrome trace (Kineto JSON) "
                  "or an Nsight Systems SQLite export of a real run (default: run the plan now, under mpirun)");
  cmd->add_option("--device", flags->device, "with a profiler trace: the GPU (rank) whose kernels to compare")->capture_default_str();
  cmd->add_option("--backend", flags->backend, "when running: cpu | cuda")->capture_default_str();
  cmd->add_option("--steps", flags->steps, "when running: training steps")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "when running: warm-up steps")->capture_default_str();
  cmd->add_option("--threads", flags->threads, "when running on cpu: OpenBLAS threads per rank")->capture_default_str();
  cmd->add_option("--watchdog-s", flags->watchdog_s,
                  "when running: abort the job when an exchange makes no progress for this many seconds (0: never)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the table");
  cmd->add_option("--trace", flags->trace, "write predicted and measured timelines side by side as a Chrome trace");
  cmd->callback([flags] { run_validate(*flags); });
});

}  // namespace

#else  // built without MPI or OpenBLAS: the command exists and says so
#include "cli/command.hpp"
#include "common/config_reader.hpp"

namespace {
const bool registered = cli::register_command(45, "validate", "compare the simulator's prediction of a plan with a measured run", [](CLI::App* cmd) {
  cmd->allow_extras();
  cmd->callback([] { throw common::ConfigError("validate", "", "this slicetune was built without MPI or OpenBLAS (the executor); install them and rebuild"); });
});
}  // namespace
#endif
