// slicetune collective: the collective model as an nccl-tests-style table.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "hardware/collective_sweep.hpp"
#include "common/limits.hpp"
#include "common/table.hpp"

namespace {

struct CollectiveFlags {
  std::string cluster = "dgx-h100";
  long long nodes = 0;
  std::string op = "allreduce";
  long long gpus = 8;
  std::string min_bytes = "1K", max_bytes = "8G";
  std::string algo, proto;
  bool json = false;
  bool given_nodes = false;
};

void run_collective(const CollectiveFlags& f) {
  auto cluster = hardware::load_cluster(f.cluster);
  hardware::SweepRequest req;
  if (!hardware::parse_collective_kind(f.op, req.kind))
    cli::bad_flag("--op", fmt::format("'{}': expected allreduce | allgather | reducescatter | broadcast | reduce | alltoall | sendrecv", f.op));
  namespace lim = common::limits;
  req.gpus = static_cast<int>(cli::int_flag("--gpus", f.gpus, 2, lim::kMaxGpus));
  req.nodes = f.given_nodes ? static_cast<int>(cli::int_flag("--nodes", f.nodes, 1, lim::kMaxNodes))
                            : std::max(1, (req.gpus + cluster.node.gpus_per_node - 1) / cluster.node.gpus_per_node);
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

const bool registered = cli::register_command(30, [](CLI::App& app) {
  auto f = std::make_shared<CollectiveFlags>();
  auto* cmd = app.add_subcommand("collective", "predict an nccl-tests sweep of one collective (algorithm, protocol, channels per size)");
  cmd->add_option("--cluster", f->cluster, "cluster name (slicetune list) or YAML file")->capture_default_str();
  cmd->add_option("--nodes", f->nodes, "nodes the GPUs span (default: as few as hold --gpus)");
  cmd->add_option("--op", f->op, "allreduce | allgather | reducescatter | broadcast | reduce | alltoall | sendrecv")->capture_default_str();
  cmd->add_option("--gpus", f->gpus, "GPUs taking part (all nodes together)")->capture_default_str();
  cmd->add_option("--min-bytes", f->min_bytes, "smallest size (1K, 64M, 8G, ...)")->capture_default_str();
  cmd->add_option("--max-bytes", f->max_bytes, "largest size; sizes double from min to max")->capture_default_str();
  cmd->add_option("--algo", f->algo, "force an algorithm, as NCCL_ALGO: ring | tree | nvls | nvls_tree | pat | p2p");
  cmd->add_option("--proto", f->proto, "force a protocol, as NCCL_PROTO: ll | ll128 | simple");
  cmd->add_flag("--json", f->json, "print one JSON object (schema_version, rows: [{bytes, time_us, algbw_GBps, busbw_GBps, algo, proto, channels}]) instead of the table");
  cmd->callback([f, cmd] {
    f->given_nodes = cmd->count("--nodes") > 0;
    run_collective(*f);
  });
});

}  // namespace
