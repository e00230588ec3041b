#include "validate/measured_trace.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sqlite3.h>  // types and constants; the functions are loaded at run time

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>

#include "common/config_reader.hpp"
#include "common/strict_json.hpp"
#include "common/table.hpp"
#include "hardware/collective_model.hpp"
#include "sim/strategy.hpp"

namespace validate {

namespace {
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
}  // namespace

std::string kernel_class(const std::string& name) {
  const std::string n = lower(name);
  if (contains(n, "nccl")) {
    if (contains(n, "allreduce")) return "AllReduce";
    if (contains(n, "allgather")) return "AllGather";
    if (contains(n, "reducescatter")) return "ReduceScatter";
    return "SendRecv";
  }
  if (contains(n, "flash") || contains(n, "fmha") || contains(n, "attention") || contains(n, "softmax")) return "attention";
  if (contains(n, "adam") || contains(n, "multi_tensor_apply")) return "optimizer";
  if (contains(n, "gemm") || contains(n, "nvjet") || contains(n, "cutlass") || contains(n, "xmma") || contains(n, "s16816") ||
      contains(n, "matmul"))
    return "GEMM";
  return "element-wise";
}

std::optional<std::string> nccl_algo(const std::string& name) {
  const std::string n = lower(name);
  if (!contains(n, "nccl")) return std::nullopt;
  for (const char* a : {"nvls_tree", "nvlstree", "nvls", "collnet", "ring", "tree", "pat"})
    if (contains(n, (std::string("_") + a).c_str())) return std::string(a) == "nvlstree" ? "nvls_tree" : a;
  return std::nullopt;
}

MeasuredTrace parse_kineto_trace(const std::string& text, const std::string& source, int device) {
  nlohmann::json j;
  try {
    j = common::parse_json_strict(text, source, "a Chrome trace JSON");  // duplicate keys, deep nesting refused
  } catch (const nlohmann::json::exception& e) {
    throw common::ConfigError(source, "", fmt::format("not a Chrome trace JSON: {}", e.what()));
  }
  if (!j.is_object() || !j.contains("traceEvents") || !j.at("traceEvents").is_array())
    throw common::ConfigError(source, "traceEvents", "missing (expected a PyTorch profiler Chrome trace)");
  MeasuredTrace m{.source = source, .format = "kineto"};
  std::vector<std::pair<double, double>> cpu_steps;
  std::size_t index = 0;
  for (const auto& e : j.at("traceEvents")) {
    ++index;
    if (!e.is_object()) continue;
    // the event's strings: absent is "", another type is refused (json::value would throw a
    // type_error, which is no ConfigError: found by fuzz_kineto, "ph": 4242)
    auto text = [&](const char* key) {
      if (!e.contains(key)) return std::string();
      if (!e.at(key).is_string())
        throw common::ConfigError(source, fmt::format("traceEvents[{}].{}", index - 1, key), fmt::format("expected a string, got {}", e.at(key).dump()));
      return e.at(key).get<std::string>();
    };
    if (text("ph") != "X") continue;
    const std::string cat = text("cat");
    const std::string name = text("name");
    if (!e.contains("ts") || !e.contains("dur") || !e.at("ts").is_number() || !e.at("dur").is_number())
      throw common::ConfigError(source, fmt::format("traceEvents[{}]", index - 1), "an X event without numeric ts and dur");
    const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
    if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0)
      throw common::ConfigError(source, fmt::format("traceEvents[{}]", index - 1), "ts / dur must be finite and dur >= 0");
    const auto& args = e.contains("args") && e.at("args").is_object() ? e.at("args") : nlohmann::json::object();
    if (cat == "kernel" || cat == "Kernel") {
      const int dev = args.contains("device") && args.at("device").is_number_integer() ? args.at("device").get<int>() : 0;
      if (dev != device) continue;
      // the stream: args.stream, else the event's tid when it is an integer (Chrome traces may name threads with strings)
      const long long stream = args.contains("stream") && args.at("stream").is_number_integer() ? args.at("stream").get<long long>()
                               : e.contains("tid") && e.at("tid").is_number_integer()           ? e.at("tid").get<long long>()
                                                                                                 : 0;
      m.kernels.push_back({name, ts, ts + dur, dev, stream});
    } else if (name.rfind("ProfilerStep#", 0) == 0) {
      (cat == "gpu_user_annotation" ? m.steps : cpu_steps).push_back({ts, ts + dur});
    }
  }
  if (m.steps.empty()) m.steps = cpu_steps;
  std::sort(m.kernels.begin(), m.kernels.end(), [](const Kernel& a, const Kernel& b) { return a.start_us < b.start_us; });
  std::sort(m.steps.begin(), m.steps.end());
  if (m.kernels.empty()) throw common::ConfigError(source, "traceEvents", fmt::format("no GPU kernels (cat \"kernel\") of device {}", device));
  return m;
}

namespace {

/// SQLite's C API, loaded with dlopen on first use: only `validate --measured FILE.sqlite` reads
/// SQLite, so no other command maps libsqlite3 (docs/benchmarks.md, start-up). Its soname, then the
/// file CMake found.
struct Sqlite {
  decltype(&::sqlite3_open_v2) open_v2;
  decltype(&::sqlite3_errmsg) errmsg;
  decltype(&::sqlite3_close) close;
  decltype(&::sqlite3_prepare_v2) prepare_v2;
  decltype(&::sqlite3_step) step;
  decltype(&::sqlite3_finalize) finalize;
  decltype(&::sqlite3_column_int) column_int;
  decltype(&::sqlite3_column_int64) column_int64;
  decltype(&::sqlite3_column_text) column_text;
};

Sqlite load_sqlite() {
  void* h = nullptr;
  std::string why;
  for (const char* name : {"libsqlite3.so.0", SLICETUNE_SQLITE3_LIBRARY}) {
    if ((h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;  // never closed: used until exit
    const char* e = ::dlerror();
    why += fmt::format("{}{}", why.empty() ? "" : "; ", e ? e : name);
  }
  if (!h) throw common::ConfigError("validate --measured", "", fmt::format("cannot load SQLite: {}; install libsqlite3-0", why));
  Sqlite s{};
  auto resolve = [&](auto& f, const char* name) {
    f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(::dlsym(h, name));
    if (!f) throw common::ConfigError("validate --measured", "", fmt::format("the SQLite library found has no {}", name));
  };
  resolve(s.open_v2, "sqlite3_open_v2");
  resolve(s.errmsg, "sqlite3_errmsg");
  resolve(s.close, "sqlite3_close");
  resolve(s.prepare_v2, "sqlite3_prepare_v2");
  resolve(s.step, "sqlite3_step");
  resolve(s.finalize, "sqlite3_finalize");
  resolve(s.column_int, "sqlite3_column_int");
  resolve(s.column_int64, "sqlite3_column_int64");
  resolve(s.column_text, "sqlite3_column_text");
  return s;
}

const Sqlite& sqlite() {
  static const Sqlite s = load_sqlite();  // thread-safe initialisation; a throw leaves it to be retried
  return s;
}

}  // namespace

MeasuredTrace read_nsys_sqlite(const std::string& path, int device) {
  const Sqlite& sq = sqlite();
  sqlite3* db = nullptr;
  if (sq.open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string msg = db ? sq.errmsg(db) : "cannot open";
    sq.close(db);
    throw common::ConfigError(path, "", "cannot open as SQLite: " + msg);
  }
  MeasuredTrace m{.source = path, .format = "nsys-sqlite"};
  auto query = [&](const char* sql, auto&& row) {
    sqlite3_stmt* st = nullptr;
    if (sq.prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
      const std::string msg = sq.errmsg(db);
      sq.close(db);
      throw common::ConfigError(path, "", "not an Nsight Systems export (nsys export --type sqlite): " + msg);
    }
    int rc;
    while ((rc = sq.step(st)) == SQLITE_ROW) row(st);
    sq.finalize(st);
    if (rc != SQLITE_DONE) {
      const std::string msg = sq.errmsg(db);
      sq.close(db);
      throw common::ConfigError(path, "", "reading failed: " + msg);
    }
  };
  query("SELECT k.start, k.end, k.deviceId, k.streamId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
        "JOIN StringIds AS s ON s.id = k.demangledName ORDER BY k.start",
        [&](sqlite3_stmt* st) {
          if (sq.column_int(st, 2) != device) return;
          const auto* name = reinterpret_cast<const char*>(sq.column_text(st, 4));
          m.kernels.push_back({name ? name : "", sq.column_int64(st, 0) / 1e3, sq.column_int64(st, 1) / 1e3, device,
                               sq.column_int64(st, 3)});
        });
  // NVTX ranges (torch.cuda.nvtx / the profiler's emit_nvtx): "ProfilerStep#N" as the steps
  bool has_nvtx = false;
  query("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'NVTX_EVENTS'", [&](sqlite3_stmt*) { has_nvtx = true; });
  if (has_nvtx)
    query("SELECT n.start, n.end, COALESCE(n.text, s.value) FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS s ON s.id = n.textId "
          "WHERE n.end IS NOT NULL ORDER BY n.start",
          [&](sqlite3_stmt* st) {
            const auto* t = reinterpret_cast<const char*>(sq.column_text(st, 2));
            if (t && std::string(t).rfind("ProfilerStep#", 0) == 0)
              m.steps.push_back({sq.column_int64(st, 0) / 1e3, sq.column_int64(st, 1) / 1e3});
          });
  sq.close(db);
  if (m.kernels.empty()) throw common::ConfigError(path, "CUPTI_ACTIVITY_KIND_KERNEL", fmt::format("no kernels of device {}", device));
  return m;
}

double TraceComparison::measured_mean_step_ms() const {
  if (measured_step_ms.empty()) return 0;
  double s = 0;
  for (double x : measured_step_ms) s += x;
  return s / static_cast<double>(measured_step_ms.size());
}

namespace {

/// Time of [a, b) covered by the union of `busy` (sorted, merged intervals).
double covered(double a, double b, const std::vector<std::pair<double, double>>& busy) {
  double c = 0;
  auto it = std::lower_bound(busy.begin(), busy.end(), std::pair<double, double>{a, a},
                             [](const auto& x, const auto& y) { return x.second < y.first; });
  for (; it != busy.end() && it->first < b; ++it) c += std::max(0.0, std::min(b, it->second) - std::max(a, it->first));
  return c;
}

std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& x : v) {
    if (!out.empty() && x.first <= out.back().second) out.back().second = std::max(out.back().second, x.second);
    else out.push_back(x);
  }
  return out;
}

std::string base_class(const std::string& task_class) {
  const auto p = task_class.find(" (");
  return p == std::string::npos ? task_class : task_class.substr(0, p);
}

}  // namespace

TraceComparison compare_trace(const sim::Target& t, const MeasuredTrace& m, const hardware::CostModel& cost) {
  TraceComparison out;
  const sim::StepGraph g = sim::build_step_graph(t.model, t.cluster, t.plan, 0);
  sim::Engine engine(cost, {.timeline = true});
  const sim::StepReport rep = engine.simulate(g);
  const auto& timing = rep.timelines.at(0).timing;
  out.predicted_step_ms = rep.step_time.ms();
  const int accum = t.plan.grad_accum_steps();

  // predicted per step: micro-batch tasks x accumulation steps + once-per-step tasks
  std::map<std::string, std::size_t> index;
  auto cls_row = [&](const std::string& name) -> ClassComparison& {
    auto [it, fresh] = index.emplace(name, out.classes.size());
    if (fresh) out.classes.push_back({.name = name});
    return out.classes[it->second];
  };
  std::vector<std::pair<double, double>> pred_compute;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!g.tasks[i].is_collective()) pred_compute.push_back({timing[i].start.us(), timing[i].end.us()});
  pred_compute = merged(pred_compute);
  std::map<std::string, CollectiveExposure> coll;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto& task = g.tasks[i];
    const int times = task.once_per_step ? 1 : accum;
    const double ms = (timing[i].end - timing[i].start).ms();
    const std::string cls = base_class(g.task_class(i));
    auto& row = cls_row(cls);
    row.tasks += times;
    row.predicted_ms += ms * times;
    if (task.is_collective()) {
      auto& c = coll[cls];
      c.name = cls;
      c.predicted_ms += ms * times;
      c.predicted_exposed_ms += (ms - covered(timing[i].start.us(), timing[i].end.us(), pred_compute) / 1e3) * times;
      if (c.predicted_algo.empty()) c.predicted_algo = cost.collective(std::get<hardware::CollectiveOp>(task.kind)).algo;
    }
  }

  // measured: kernels inside each step range (the whole trace when it has no step annotations)
  std::vector<std::pair<double, double>> steps = m.steps;
  if (steps.empty()) steps.push_back({m.kernels.front().start_us, m.kernels.back().end_us});
  std::vector<std::pair<double, double>> compute;
  for (const auto& k : m.kernels)
    if (!contains(lower(k.name), "nccl")) compute.push_back({k.start_us, k.end_us});
  compute = merged(compute);
  std::map<std::string, std::pair<double, double>> tp_overlap;  // class -> (beside compute, total)
  std::set<std::string> measured_algos;
  int steps_with_kernels = 0;
  for (const auto& [a, b] : steps) {
    double first = 1e300, last = -1e300;
    for (const auto& k : m.kernels) {
      if (k.start_us < a || k.start_us >= b) continue;
      first = std::min(first, k.start_us);
      last = std::max(last, k.end_us);
      const std::string cls = kernel_class(k.name);
      auto& row = cls_row(cls);
      row.kernels += 1;
      row.measured_ms += (k.end_us - k.start_us) / 1e3;
      if (cls == "AllReduce" || cls == "AllGather" || cls == "ReduceScatter" || cls == "SendRecv") {
        auto& c = coll[cls];
        c.name = cls;
        const double d = k.end_us - k.start_us, beside = covered(k.start_us, k.end_us, compute);
        c.measured_ms += d / 1e3;
        c.measured_exposed_ms += (d - beside) / 1e3;
        if (auto algo = nccl_algo(k.name)) {
          if (c.measured_algo.find(*algo) == std::string::npos) c.measured_algo += (c.measured_algo.empty() ? "" : ",") + *algo;
          measured_algos.insert(*algo);
        }
      }
    }
    if (last > first) {
      out.measured_step_ms.push_back((last - first) / 1e3);
      ++steps_with_kernels;
    }
  }
  const double n = std::max(1, steps_with_kernels);
  for (auto& row : out.classes) {
    row.kernels = static_cast<int>(std::lround(row.kernels / n));
    row.measured_ms /= n;
    row.matched_one_to_one = row.kernels == row.tasks;
  }
  for (auto& [name, c] : coll) {
    c.measured_ms /= n;
    c.measured_exposed_ms /= n;
    out.collectives.push_back(c);
  }
  // silent fallbacks
  const bool overlap_planned = !t.plan.strategy->baseline;  // the baseline strategy overlaps no TP collective
  for (const auto& c : out.collectives) {
    const double pred_beside = c.predicted_ms > 0 ? 1 - c.predicted_exposed_ms / c.predicted_ms : 0;
    const double meas_beside = c.measured_ms > 0 ? 1 - c.measured_exposed_ms / c.measured_ms : 0;
    if (overlap_planned && c.measured_ms > 0 && pred_beside > 0.2 && meas_beside < 0.05)
      out.fallbacks.push_back(fmt::format("{}: the plan overlaps it with compute ({}; {:.0f} % of its time beside compute predicted) but the run "
                                          "serialized it ({:.0f} % beside compute): one stream, CUDA_DEVICE_MAX_CONNECTIONS, or a blocking wait?",
                                          c.name, sim::describe(t.plan), 100 * pred_beside, 100 * meas_beside));
    if (!c.measured_algo.empty() && !c.predicted_algo.empty() && c.measured_algo.find(c.predicted_algo) == std::string::npos)
      out.fallbacks.push_back(fmt::format("{}: predicted NCCL algorithm {}, the kernels ran {} (NCCL_ALGO, NCCL_NVLS_ENABLE or the topology?)", c.name,
                                          c.predicted_algo, c.measured_algo));
  }
  std::set<long long> streams;
  for (const auto& k : m.kernels) streams.insert(k.stream);
  if (streams.size() == 1 && (overlap_planned || t.plan.dp > 1))
    out.fallbacks.push_back("every kernel ran on one CUDA stream: no collective could overlap compute");
  return out;
}

std::string trace_comparison_table(const TraceComparison& c) {
  common::Table t({"", "tasks", "kernels", "predicted", "measured", "error", "mapped"}, {"", "per step", "per step", "ms", "ms", "%", ""});
  const double step = c.measured_mean_step_ms();
  t.row({"step", "", "", fmt::format("{:.3f}", c.predicted_step_ms), fmt::format("{:.3f}", step),
         step > 0 ? fmt::format("{:+.1f}", 100 * (c.predicted_step_ms - step) / step) : "-", ""});
  for (const auto& r : c.classes)
    t.row({r.name, std::to_string(r.tasks), std::to_string(r.kernels), fmt::format("{:.3f}", r.predicted_ms), fmt::format("{:.3f}", r.measured_ms),
           r.measured_ms > 0 ? fmt::format("{:+.1f}", 100 * r.error()) : "-", r.matched_one_to_one ? "1:1 in order" : "by class"});
  std::string out = t.str();
  out += "\nper step:";
  for (std::size_t i = 0; i < c.measured_step_ms.size(); ++i) out += fmt::format(" {:.3f}", c.measured_step_ms[i]);
  out += fmt::format(" ms measured, {:.3f} ms predicted\n\n", c.predicted_step_ms);
  common::Table e({"collective", "predicted", "exposed", "measured", "exposed", "algo predicted", "algo measured"}, {"", "ms", "ms", "ms", "ms", "", ""});
  for (const auto& x : c.collectives)
    e.row({x.name, fmt::format("{:.3f}", x.predicted_ms), fmt::format("{:.3f}", x.predicted_exposed_ms), fmt::format("{:.3f}", x.measured_ms),
           fmt::format("{:.3f}", x.measured_exposed_ms), x.predicted_algo.empty() ? "-" : x.predicted_algo, x.measured_algo.empty() ? "-" : x.measured_algo});
  out += e.str();
  out += c.fallbacks.empty() ? "\nsilent fallbacks: none found\n" : "\nsilent fallbacks:\n";
  for (const auto& f : c.fallbacks) out += "  " + f + "\n";
  return out;
}

nlohmann::json trace_comparison_json(const TraceComparison& c) {
  nlohmann::json classes = nlohmann::json::array(), colls = nlohmann::json::array();
  for (const auto& r : c.classes)
    classes.push_back({{"class", r.name}, {"tasks_per_step", r.tasks}, {"kernels_per_step", r.kernels}, {"predicted_ms", r.predicted_ms},
                       {"measured_ms", r.measured_ms}, {"error", r.error()}, {"mapped_one_to_one", r.matched_one_to_one}});
  for (const auto& x : c.collectives)
    colls.push_back({{"collective", x.name}, {"predicted_ms", x.predicted_ms}, {"predicted_exposed_ms", x.predicted_exposed_ms},
                     {"measured_ms", x.measured_ms}, {"measured_exposed_ms", x.measured_exposed_ms}, {"predicted_algo", x.predicted_algo},
                     {"measured_algo", x.measured_algo}});
  return {{"predicted_step_ms", c.predicted_step_ms}, {"measured_step_ms", c.measured_step_ms}, {"measured_mean_step_ms", c.measured_mean_step_ms()},
          {"classes", classes}, {"collectives", colls}, {"fallbacks", c.fallbacks}};
}

}  // namespace validate
