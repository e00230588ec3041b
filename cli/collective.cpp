// slicetune collective: the collective model as an nccl-tests-style table; with several node counts,
// one bus-bandwidth column per count beside the published measurements of data/calibration.
#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.hpp"
#include "common/limits.hpp"
#include "common/table.hpp"
#include "hardware/collective_sweep.hpp"
#include "validate/calibration.hpp"

namespace {

struct CollectiveFlags {
  std::string cluster = "dgx-h100";
  std::string nodes;
  std::string op = "allreduce";
  long long gpus = 0;  // given when given_gpus
  std::string min_bytes = "1K", max_bytes = "8G";
  std::string algo, proto;
  std::string calibration = "data/calibration";
  bool json = false;
  bool given_gpus = false;
};

/// At most this many node counts in one --nodes list (one sweep each).
constexpr std::size_t kMaxNodeCounts = 64;

std::vector<int> parse_nodes(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    long long n = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size())
      cli::bad_flag("--nodes", fmt::format("'{}': expected a node count or a comma-separated list such as 1,2,4,16", text));
    out.push_back(static_cast<int>(cli::int_flag("--nodes", n, 1, common::limits::kMaxNodes)));  // checked before narrowing
    if (out.size() > kMaxNodeCounts) cli::bad_flag("--nodes", fmt::format("more than {} node counts", kMaxNodeCounts));
  }
  if (out.empty()) cli::bad_flag("--nodes", "expected a node count or a comma-separated list such as 1,2,4,16");
  return out;
}

/// Published bus bandwidth (GB/s) by (nodes, bytes) for this collective on this cluster, NCCL's own choice.
std::map<std::pair<int, std::int64_t>, double> published(const std::string& dir, const std::string& cluster, hardware::CollectiveKind kind) {
  std::map<std::pair<int, std::int64_t>, double> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& m : validate::read_nccl_measurements(dir))
    if (m.cluster == cluster && m.kind == kind && m.gpus == 8 * m.nodes && !m.forced) out[{m.nodes, m.bytes}] = m.busbw_GBps;
  return out;
}

void run_collective(const CollectiveFlags& f) {
  auto cluster = hardware::load_cluster(f.cluster);
  hardware::SweepRequest req;
  if (!hardware::parse_collective_kind(f.op, req.kind))
    cli::bad_flag("--op", fmt::format("'{}': expected allreduce | allgather | reducescatter | broadcast | reduce | alltoall | sendrecv", f.op));
  req.min_bytes = hardware::parse_bytes(f.min_bytes, "--min-bytes");
  req.max_bytes = hardware::parse_bytes(f.max_bytes, "--max-bytes");
  if (!f.algo.empty()) {
    hardware::CollectiveAlgo a;
    if (!hardware::parse_collective_algo(f.algo, a)) cli::bad_flag("--algo", fmt::format("'{}': expected ring | tree | nvls | nvls_tree | pat | p2p", f.algo));
    req.options.algo = a;
  }
  if (!f.proto.empty()) {
    hardware::CollectiveProto p;
    if (!hardware::parse_collective_proto(f.proto, p)) cli::bad_flag("--proto", fmt::format("'{}': expected ll | ll128 | simple", f.proto));
    req.options.proto = p;
  }
  namespace lim = common::limits;
  const int gpn = cluster.node.gpus_per_node;
  const std::vector<int> node_list = f.nodes.empty() ? std::vector<int>{} : parse_nodes(f.nodes);
  const int gpus = f.given_gpus ? static_cast<int>(cli::int_flag("--gpus", f.gpus, 2, lim::kMaxGpus)) : 0;  // checked before narrowing
  if (node_list.size() > 1) {
    // one column per node count, every GPU of every node taking part
    if (f.given_gpus) cli::bad_flag("--gpus", "with several --nodes every GPU of each node takes part; leave --gpus out");
    const auto measured = published(f.calibration, cluster.name, req.kind);
    std::vector<std::vector<hardware::CollectiveRow>> cols;
    for (int n : node_list) {
      auto c = cluster;
      hardware::set_nodes(c, n, "--nodes");  // n x GPUs per node within limits::kMaxGpus
      req.nodes = n;
      req.gpus = n * gpn;
      cols.push_back(hardware::collective_sweep(c, req));
    }
    if (f.json) {
      nlohmann::json out = nlohmann::json::array();
      for (std::size_t i = 0; i < cols.front().size(); ++i)
        for (std::size_t k = 0; k < node_list.size(); ++k) {
          const auto& r = cols[k][i];
          nlohmann::json j{{"nodes", node_list[k]}, {"gpus", node_list[k] * gpn}, {"bytes", r.bytes}, {"time_us", r.time_us},
                           {"algbw_GBps", r.algbw_GBps}, {"busbw_GBps", r.busbw_GBps}, {"algo", r.algo}, {"proto", r.proto}, {"channels", r.channels}};
          const auto it = measured.find({node_list[k], r.bytes});
          if (it != measured.end()) j["measured_busbw_GBps"] = it->second;
          out.push_back(j);
        }
      std::cout << nlohmann::json{{"schema_version", cli::kJsonSchemaVersion}, {"rows", out}}.dump(2) << "\n";
      return;
    }
    std::vector<std::string> header{"size"}, units{"B"};
    for (int n : node_list) {
      header.push_back(fmt::format("{} node{}", n, n > 1 ? "s" : ""));
      units.push_back("busbw GB/s");
      header.push_back("");
      units.push_back("algo/proto");
    }
    common::Table t(header, units);
    bool any_measured = false;
    for (std::size_t i = 0; i < cols.front().size(); ++i) {
      std::vector<std::string> cells{fmt::format("{}", cols.front()[i].bytes)};
      for (std::size_t k = 0; k < node_list.size(); ++k) {
        const auto& r = cols[k][i];
        const auto it = measured.find({node_list[k], r.bytes});
        any_measured |= it != measured.end();
        cells.push_back(it != measured.end() ? fmt::format("{:.1f} ({:.1f})", r.busbw_GBps, it->second) : fmt::format("{:.1f}", r.busbw_GBps));
        cells.push_back(r.algo + "/" + r.proto);
      }
      t.row(cells);
    }
    fmt::print("slicetune collective: {} over all GPUs of {} ({} per node), analytic NCCL model\n\n{}", f.op, cluster.name, gpn, t.str());
    if (any_measured)
      fmt::print("\n(in parentheses: nccl-tests bus bandwidth published for that size and node count, {}/)\n", f.calibration);
    return;
  }
  req.gpus = gpus > 0 ? gpus : (node_list.empty() ? gpn : node_list.front() * gpn);
  req.nodes = !node_list.empty() ? node_list.front() : std::max(1, (req.gpus + gpn - 1) / gpn);
  hardware::set_nodes(cluster, req.nodes, "--nodes");
  const auto rows = hardware::collective_sweep(cluster, req);
  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"bytes", r.bytes}, {"time_us", r.time_us}, {"algbw_GBps", r.algbw_GBps}, {"busbw_GBps", r.busbw_GBps},
                     {"algo", r.algo}, {"proto", r.proto}, {"channels", r.channels}});
    std::cout << nlohmann::json{{"schema_version", cli::kJsonSchemaVersion}, {"rows", out}}.dump(2) << "\n";
    return;
  }
  common::Table t({"size", "time", "algbw", "busbw", "algo", "proto", "channels"}, {"B", "us", "GB/s", "GB/s", "", "", ""});
  for (const auto& r : rows)
    t.row({fmt::format("{}", r.bytes), fmt::format("{:.1f}", r.time_us), fmt::format("{:.2f}", r.algbw_GBps),
           fmt::format("{:.2f}", r.busbw_GBps), r.algo, r.proto, fmt::format("{}", r.channels)});
  fmt::print("slicetune collective: {} over {} GPUs ({} node{}) of {}, analytic NCCL model\n\n{}", f.op, req.gpus, req.nodes,
             req.nodes > 1 ? "s" : "", cluster.name, t.str());
}

const bool registered = cli::register_command(30, "collective", "predict an nccl-tests sweep of one collective (algorithm, protocol, channels per size)", [](CLI::App* cmd) {
  auto f = std::make_shared<CollectiveFlags>();
  cmd->add_option("--cluster", f->cluster, "cluster name (slicetune list) or YAML file")->capture_default_str();
  cmd->add_option("--nodes", f->nodes,
                  "nodes the GPUs span (default: as few as hold --gpus); a list (1,2,4,16) prints one bus-bandwidth column per node count,"
                  " all GPUs of each node taking part, beside the published nccl-tests figures where data/calibration has them");
  cmd->add_option("--op", f->op, "allreduce | allgather | reducescatter | broadcast | reduce | alltoall | sendrecv")->capture_default_str();
  cmd->add_option("--gpus", f->gpus, "GPUs taking part (all nodes together; default: every GPU of --nodes nodes, one node without it)");
  cmd->add_option("--min-bytes", f->min_bytes, "smallest size (1K, 64M, 8G, ...)")->capture_default_str();
  cmd->add_option("--max-bytes", f->max_bytes, "largest size; sizes double from min to max")->capture_default_str();
  cmd->add_option("--algo", f->algo, "force an algorithm, as NCCL_ALGO: ring | tree | nvls | nvls_tree | pat | p2p");
  cmd->add_option("--proto", f->proto, "force a protocol, as NCCL_PROTO: ll | ll128 | simple");
  cmd->add_option("--calibration", f->calibration, "folder of published measurements shown beside a node-count list")->capture_default_str();
  cmd->add_flag("--json", f->json, "print one JSON object (schema_version, rows: [{bytes, time_us, algbw_GBps, busbw_GBps, algo, proto, channels}]; with a node-count list each row also has nodes, gpus and measured_busbw_GBps where published) instead of the table");
  cmd->callback([f, cmd] {
    f->given_gpus = cmd->count("--gpus") > 0;
    run_collective(*f);
  });
});

}  // namespace
