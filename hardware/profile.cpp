#include "hardware/profile.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "common/atomic_write.hpp"
#include "hardware/collective_model.hpp"
#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "common/limits.hpp"

namespace hardware {

double CollectivePoint::busbw_gb_s() const { return algbw_gb_s() * bus_factor(kind, ranks); }

namespace {

// ---- writing ---------------------------------------------------------------------------------

std::string scalar(const std::string& s) { return common::yaml_scalar_text(s); }
std::string quoted(const std::string& s) { return common::yaml_quoted(s); }

/// Shortest text that reads back as the same double (fmt's default), so load -> save is exact.
std::string num(double v) { return fmt::format("{}", v); }

std::string dtype_name(common::DType t) { return std::string(to_string(t)); }

// ---- reading ---------------------------------------------------------------------------------

common::DType read_dtype(common::ConfigReader& r, const std::string& key) {
  const auto s = r.choice(key, {"fp32", "bf16", "fp16", "fp8"});
  common::DType t{};
  common::parse_dtype(s, t);
  return t;
}

template <class F>
void for_each_row(common::ConfigReader& parent, const common::YamlNode& seq, const std::string& key, F&& f) {
  if (!seq) return;
  if (!seq.is_sequence()) parent.fail(key, "expected a list of rows");
  for (std::size_t i = 0; i < seq.size(); ++i) {
    if (!seq[i].is_map()) parent.fail(fmt::format("{}[{}]", key, i), "expected a mapping");
    common::ConfigReader row(seq[i], parent.source(), parent.path(fmt::format("{}[{}]", key, i)));
    f(row);
    row.finish();
  }
}

namespace lim = common::limits;

double positive_us(common::ConfigReader& r) { return r.positive("us", lim::kMaxMeasuredUs); }
std::int64_t dim(common::ConfigReader& r, const char* key) { return r.positive_integer(key, lim::kMaxProfileDim); }

/// Refuses keys outside `allowed` (for mappings that hold lists, which common::ConfigReader::child cannot consume).
void check_keys(const common::YamlNode& n, const std::string& source, const std::string& prefix, const std::vector<std::string>& allowed) {
  for (const auto& [k, v] : n.entries()) {
    const std::string& key = k.scalar();  // parse_yaml refused keys that are not scalars
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw common::ConfigError(source, prefix.empty() ? key : prefix + "." + key,
                        fmt::format("unknown key (expected one of {})", fmt::join(allowed, ", ")));
  }
}

}  // namespace

ClusterSpec cluster_from_node(const common::YamlNode& node, const std::string& source) {
  return parse_cluster(common::emit_yaml_mapping(node, source), source);
}

Profile parse_profile(const std::string& text, const std::string& source) {
  const common::YamlNode root = common::parse_yaml(text, source);
  if (!root.is_map() || !root["version"])
    throw common::ConfigError(source, "version", "missing: not a slicetune profile file (write one with `slicetune profile`)");
  common::ConfigReader r(root, source);
  Profile p;
  p.source = source;
  const long long version = r.integer("version");  // compared as read: 2^32 + 1 must not pass as 1
  if (version != kProfileVersion)
    r.fail("version", fmt::format("profile format version {}, but this slicetune reads version {}; re-measure with "
                                  "`slicetune profile` (tables change meaning between versions)",
                                  version, kProfileVersion));
  p.version = kProfileVersion;
  {
    auto i = r.child("info");
    p.info.backend = i.choice("backend", {"cpu", "cuda"});
    p.info.device = i.str("device");
    p.info.host = i.str("host");
    p.info.date = i.str("date");
    p.info.ranks = i.int_in("ranks", 1, static_cast<int>(lim::kMaxGpus));
    p.info.quick = i.boolean("quick");
    p.info.command = i.str("command");
    if (root["info"]["libraries"]) {
      const common::YamlNode libs = root["info"]["libraries"];
      if (!libs.is_map()) i.fail("libraries", "expected a mapping name: version");
      auto lr = i.child("libraries");
      for (const auto& [k, v] : libs.entries()) {
        const std::string& name = k.scalar();
        p.info.libraries[name] = lr.str(name);
      }
      lr.finish();
    }
    i.finish();
  }
  if (!root["cluster"].is_map()) r.fail("cluster", "missing: expected the profiled machine as a cluster mapping");
  check_keys(root, source, "", {"version", "info", "cluster", "gemm", "attention", "elementwise", "optimizer", "collectives",
                               "collectives_beside_compute", "interference", "host"});
  p.cluster_node = root["cluster"].deep_copy();
  p.cluster = cluster_from_node(p.cluster_node, source + ": cluster");
  p.cluster.source = source;

  if (root["gemm"]) {
    if (!root["gemm"].is_map()) r.fail("gemm", "expected a mapping with tile, runs_as and points");
    check_keys(root["gemm"], source, "gemm", {"tile", "grid", "runs_as", "points"});
    common::ConfigReader g(root["gemm"], source, "gemm");
    auto tile = g.child("tile");
    p.gemm_tile_m = tile.int_in("m", 1, 65536);
    p.gemm_tile_n = tile.int_in("n", 1, 65536);
    tile.finish();
    if (root["gemm"]["grid"]) {
      const common::YamlNode grid = root["gemm"]["grid"];
      if (!grid.is_map()) g.fail("grid", "expected {m: [...], n: [...], k: [...]}");
      check_keys(grid, source, "gemm.grid", {"m", "n", "k"});
      auto axis = [&](const char* key, std::vector<std::int64_t>& out) {
        const common::YamlNode a = grid[key];
        if (!a.is_sequence() || a.size() == 0) g.fail(std::string("grid.") + key, "expected a non-empty list of sizes");
        for (const auto& v : a.items()) {
          const auto read = v.is_scalar() ? common::yaml_to_integer(v.scalar()) : std::nullopt;
          if (!read) g.fail(std::string("grid.") + key, "expected positive integers");
          const long long x = *read;
          if (x <= 0 || x > lim::kMaxProfileDim || (!out.empty() && x <= out.back()))
            g.fail(std::string("grid.") + key, fmt::format("expected increasing positive integers up to {}", lim::kMaxProfileDim));
          if (out.size() >= 64) g.fail(std::string("grid.") + key, "expected at most 64 sizes per axis");
          out.push_back(x);
        }
      };
      axis("m", p.grid_m);
      axis("n", p.grid_n);
      axis("k", p.grid_k);
    }
    if (root["gemm"]["runs_as"]) {
      auto ra = g.child("runs_as");
      for (common::DType t : {common::DType::fp32, common::DType::bf16, common::DType::fp16, common::DType::fp8})
        if (ra.has(dtype_name(t))) p.runs_as[t] = read_dtype(ra, dtype_name(t));
      ra.finish();
    }
    for_each_row(g, root["gemm"]["points"], "points", [&](common::ConfigReader& row) {
      GemmPoint pt;
      pt.dtype = read_dtype(row, "dtype");
      pt.m = dim(row, "m");
      pt.n = dim(row, "n");
      pt.k = dim(row, "k");
      pt.us = positive_us(row);
      p.gemm.push_back(pt);
    });
    // every grid point must be measured for every dtype present, or interpolation would have holes
    std::set<std::tuple<common::DType, std::int64_t, std::int64_t, std::int64_t>> have;
    std::set<common::DType> dtypes;
    for (const auto& pt : p.gemm) {
      have.insert({pt.dtype, pt.m, pt.n, pt.k});
      dtypes.insert(pt.dtype);
    }
    for (common::DType t : dtypes)
      for (auto m : p.grid_m)
        for (auto n : p.grid_n)
          for (auto k : p.grid_k)
            if (!have.count({t, m, n, k}))
              g.fail("points", fmt::format("grid point {} m={} n={} k={} is not measured (every grid point must be)", to_string(t), m, n, k));
  }
  auto list = [&](const char* key, auto&& read_row) {
    if (!root[key]) return;
    for_each_row(r, root[key], key, read_row);
  };
  list("attention", [&](common::ConfigReader& row) {
    AttentionPoint pt;
    pt.dtype = read_dtype(row, "dtype");
    pt.backward = row.boolean("backward");
    pt.batch = dim(row, "batch");
    pt.heads = dim(row, "heads");
    pt.s = dim(row, "s");
    pt.head_dim = dim(row, "head_dim");
    pt.us = positive_us(row);
    p.attention.push_back(pt);
  });
  list("elementwise", [&](common::ConfigReader& row) {
    ElementwisePoint pt;
    pt.kind = row.str("kind");
    pt.backward = row.boolean("backward");
    pt.elements = row.positive_integer("elements", lim::kMaxProfileElements);
    pt.us = positive_us(row);
    p.elementwise.push_back(pt);
  });
  list("optimizer", [&](common::ConfigReader& row) {
    OptimizerPoint pt;
    pt.params = row.positive_integer("params", lim::kMaxProfileElements);
    pt.us = positive_us(row);
    p.optimizer.push_back(pt);
  });
  auto read_collective = [&](common::ConfigReader& row, bool with_time) {
    CollectivePoint pt;
    const auto op = row.choice("op", {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"});
    parse_collective_kind(op, pt.kind);
    pt.ranks = row.int_in("ranks", 1, static_cast<int>(lim::kMaxGpus));
    pt.nodes = row.int_in("nodes", 1, pt.ranks);
    pt.bytes = row.positive_integer("bytes", lim::kMaxCollectiveBytes);
    if (with_time) pt.us = positive_us(row);
    return pt;
  };
  list("collectives", [&](common::ConfigReader& row) { p.collectives.push_back(read_collective(row, true)); });
  list("collectives_beside_compute", [&](common::ConfigReader& row) { p.collectives_beside_compute.push_back(read_collective(row, true)); });
  if (root["interference"]) {
    auto i = r.child("interference");
    InterferenceMeasurement m;
    auto g = i.child("gemm");
    m.gemm.dtype = read_dtype(g, "dtype");
    m.gemm.m = dim(g, "m");
    m.gemm.n = dim(g, "n");
    m.gemm.k = dim(g, "k");
    g.finish();
    auto c = i.child("collective");
    m.collective = read_collective(c, false);
    c.finish();
    m.gemm.us = i.positive("gemm_alone_us", lim::kMaxMeasuredUs);
    m.gemm_beside_us = i.positive("gemm_beside_collective_us", lim::kMaxMeasuredUs);
    m.collective.us = i.positive("collective_alone_us", lim::kMaxMeasuredUs);
    m.collective_beside_us = i.positive("collective_beside_gemm_us", lim::kMaxMeasuredUs);
    i.finish();
    p.interference = m;
  }
  if (root["host"]) {
    auto h = r.child("host");
    HostMeasurement m;
    m.launch_us = h.number_in("launch_us", 0, lim::kMaxMicroseconds);
    m.method = h.str("method");
    if (h.has("collective_handoff_us")) {
      m.collective_handoff_us = h.number_in("collective_handoff_us", 0, lim::kMaxMicroseconds);
      m.handoff_method = h.str("handoff_method");
    }
    h.finish();
    p.host = m;
  }
  return p;
}

Profile load_profile(const std::string& name_or_path) {
  auto cfg = common::resolve_config("profiles", name_or_path);
  return parse_profile(cfg.text, cfg.source);
}

std::string format_profile(const Profile& p) {
  std::string o;
  o += "# slicetune profile: measured costs of one machine, written by `slicetune profile` (docs/profiler.md).\n";
  o += "# Times are the median per call after warm-up (compute: mean over ranks; collectives: max); us = microseconds.\n";
  o += fmt::format("version: {}\n", p.version);
  o += "info:\n";
  o += "  backend: " + scalar(p.info.backend) + "\n";
  o += "  device: " + quoted(p.info.device) + "\n";
  o += "  host: " + quoted(p.info.host) + "\n";
  o += "  date: " + quoted(p.info.date) + "\n";
  o += fmt::format("  ranks: {}\n", p.info.ranks);
  o += fmt::format("  quick: {}\n", p.info.quick);
  o += "  command: " + quoted(p.info.command) + "\n";
  if (!p.info.libraries.empty()) {
    o += "  libraries:\n";
    for (const auto& [name, version] : p.info.libraries) o += "    " + scalar(name) + ": " + quoted(version) + "\n";
  }
  o += "# The profiled machine in configs/clusters/ form: the analytic model's parameters outside the tables.\n";
  o += "cluster:\n";
  o += common::emit_yaml_mapping(p.cluster_node, "profile", 2, "cluster");
  o += "gemm:\n";
  o += fmt::format("  tile: {{m: {}, n: {}}}  # sizes are padded up to the kernel's tile before interpolating\n", p.gemm_tile_m,
                   p.gemm_tile_n);
  auto axis = [](const std::vector<std::int64_t>& a) { return fmt::format("[{}]", fmt::join(a, ", ")); };
  if (!p.grid_m.empty())
    o += fmt::format("  grid: {{m: {}, n: {}, k: {}}}  # measured for every combination\n", axis(p.grid_m), axis(p.grid_n), axis(p.grid_k));
  if (!p.runs_as.empty()) {
    o += "  runs_as: {";
    bool first = true;
    for (const auto& [req, real] : p.runs_as) {
      o += fmt::format("{}{}: {}", first ? "" : ", ", to_string(req), to_string(real));
      first = false;
    }
    o += "}  # requested dtype: dtype the backend computes in\n";
  }
  o += "  points:\n";
  for (const auto& g : p.gemm) {
    const double gflops = 2.0 * g.m * g.n * g.k / (g.us * 1e-6) / 1e9;
    o += fmt::format("    - {{dtype: {}, m: {}, n: {}, k: {}, us: {}}}  # {:.2f} GFLOP/s\n", to_string(g.dtype), g.m, g.n, g.k,
                     num(g.us), gflops);
  }
  if (!p.attention.empty()) {
    o += "attention:  # causal, s_q = s_kv = s\n";
    for (const auto& a : p.attention)
      o += fmt::format("  - {{dtype: {}, backward: {}, batch: {}, heads: {}, s: {}, head_dim: {}, us: {}}}\n", to_string(a.dtype),
                       a.backward, a.batch, a.heads, a.s, a.head_dim, num(a.us));
  }
  if (!p.elementwise.empty()) {
    o += "elementwise:  # elements = the kernel's output elements\n";
    for (const auto& e : p.elementwise)
      o += fmt::format("  - {{kind: {}, backward: {}, elements: {}, us: {}}}  # {:.3f} ns/element\n", scalar(e.kind), e.backward,
                       e.elements, num(e.us), e.us * 1e3 / static_cast<double>(e.elements));
  }
  if (!p.optimizer.empty()) {
    o += "optimizer:  # fused AdamW step\n";
    for (const auto& e : p.optimizer) o += fmt::format("  - {{params: {}, us: {}}}\n", e.params, num(e.us));
  }
  if (!p.collectives.empty()) {
    o += "collectives:  # bytes as nccl-tests counts them; busbw = algbw x bus factor\n";
    for (const auto& c : p.collectives)
      o += fmt::format("  - {{op: {}, ranks: {}, nodes: {}, bytes: {}, us: {}}}  # algbw {:.3f} GB/s, busbw {:.3f} GB/s\n",
                       to_string(c.kind), c.ranks, c.nodes, c.bytes, num(c.us), c.algbw_gb_s(), c.busbw_gb_s());
  }
  if (!p.collectives_beside_compute.empty()) {
    o += "collectives_beside_compute:  # issued as the CPU executor does (non-blocking, sleeping poll on a communication thread) "
         "while the rank's other thread computes; timed on the communication thread\n";
    for (const auto& c : p.collectives_beside_compute)
      o += fmt::format("  - {{op: {}, ranks: {}, nodes: {}, bytes: {}, us: {}}}\n", to_string(c.kind), c.ranks, c.nodes, c.bytes, num(c.us));
  }
  if (p.interference) {
    const auto& m = *p.interference;
    o += "interference:  # a GEMM alone vs beside a running collective, and the collective alone vs beside the GEMM\n";
    o += fmt::format("  gemm: {{dtype: {}, m: {}, n: {}, k: {}}}\n", to_string(m.gemm.dtype), m.gemm.m, m.gemm.n, m.gemm.k);
    o += fmt::format("  collective: {{op: {}, ranks: {}, nodes: {}, bytes: {}}}\n", to_string(m.collective.kind), m.collective.ranks,
                     m.collective.nodes, m.collective.bytes);
    o += fmt::format("  gemm_alone_us: {}\n", num(m.gemm.us));
    o += fmt::format("  gemm_beside_collective_us: {}  # compute slowdown {:.1f} %\n", num(m.gemm_beside_us), 100 * m.compute_slowdown());
    o += fmt::format("  collective_alone_us: {}\n", num(m.collective.us));
    o += fmt::format("  collective_beside_gemm_us: {}  # communication slowdown {:.1f} %\n", num(m.collective_beside_us),
                     100 * m.comm_slowdown());
  }
  if (p.host) {
    o += "host:  # host time to issue one task on this backend (replaces the cluster's host.launch_us)\n";
    o += fmt::format("  launch_us: {}\n", num(p.host->launch_us));
    o += "  method: " + quoted(p.host->method) + "\n";
    if (p.host->collective_handoff_us) {
      o += fmt::format("  collective_handoff_us: {}\n", num(*p.host->collective_handoff_us));
      o += "  handoff_method: " + quoted(p.host->handoff_method) + "\n";
    }
  }
  return o;
}

void write_profile(const std::string& path, const Profile& p) { common::write_file_atomically(path, format_profile(p)); }

}  // namespace hardware
