// slicetune whatif: re-tune at every point of a sweep over cluster and model parameters.
#include <fmt/format.h>

#include <iostream>

#include "cli/search_flags.hpp"
#include "cli/search_processes.hpp"
#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "tuner/whatif.hpp"

namespace {

struct WhatIfFlags : cli::SearchFlags {
  std::vector<std::string> sweeps;
  std::string csv, plot;
  bool json = false, by_layout = false;
};

/// Points of one sweep (every combination is re-tuned, ~0.05-1 s each).
constexpr std::size_t kMaxPoints = 10000;

void whatif(const WhatIfFlags& f, const cli::SearchProcesses& procs) {
  if (!f.target.profile.empty())
    cli::bad_flag("--profile", "whatif sweeps hardware parameters that a measured profile cannot follow; it uses the analytic model");
  auto [model, cluster, space] = cli::search_setup(f);
  std::vector<tuner::SweepAxis> axes;
  std::size_t n_points = 1;
  for (const auto& s : f.sweeps) {
    axes.push_back(tuner::parse_sweep(s));
    for (std::size_t i = 0; i + 1 < axes.size(); ++i)
      if (axes[i].key == axes.back().key)
        cli::bad_flag("--sweep", fmt::format("{}: given twice ('{}' and '{}'); give one --sweep per key with all its values", axes.back().key,
                                             f.sweeps[i], s));
    n_points *= axes.back().values.size();
    if (n_points > kMaxPoints) cli::bad_flag("--sweep", fmt::format("more than {} points to tune; sweep fewer values", kMaxPoints));
  }
  if (!f.plot.empty() && (f.plot.size() < 5 || (f.plot.substr(f.plot.size() - 4) != ".png" && f.plot.substr(f.plot.size() - 4) != ".svg")))
    cli::bad_flag("--plot", "expected a file name ending in .png or .svg, got '" + f.plot + "'");
  if (procs.prints()) {
    common::check_output_path(f.csv, "--csv");
    common::check_output_path(f.plot, "--plot");
  }

  // under mpirun -np N every point's screening is split over the N processes (same answer)
  tuner::SearchOptions opt{.threads = static_cast<int>(f.threads),
                           .top_k = 1,
                           .prune = true,
                           .extra_full = 3,
                           .progress = {},
                           .distribution = procs.distribution()};
  const auto points = tuner::whatif(model, cluster, space, axes, opt, [&](std::size_t i, std::size_t n) {
    if (!procs.prints()) return;
    std::string what;
    for (const auto& a : axes) what += (what.empty() ? "" : ", ") + a.key;
    fmt::print(stderr, "slicetune whatif: tuning point {}/{} ({})\n", i + 1, n, what);
  });
  if (!procs.prints()) return;  // rank 0 prints and writes
  if (!f.csv.empty()) common::write_file_atomically(f.csv, f.by_layout ? tuner::whatif_layout_csv(points) : tuner::whatif_csv(points));
  bool nodes_swept = false, cluster_swept = false;
  for (const auto& a : axes) {
    nodes_swept |= a.key == "nodes";
    cluster_swept |= a.key == "cluster";
  }
  // the title names only what the sweep holds fixed
  const std::string scaling = tuner::scaling_of(points);
  const std::string title = fmt::format("{}{}{}: {}{}", model.name, cluster_swept ? "" : " on " + cluster.name,
                                        nodes_swept ? "" : fmt::format(" ({} node{})", cluster.nodes, cluster.nodes > 1 ? "s" : ""),
                                        f.by_layout ? "best plan of each TP layout" : "baseline vs tuned", scaling.empty() ? "" : ", " + scaling);
  if (!f.plot.empty()) tuner::plot_whatif(points, title, f.plot, f.by_layout);
  if (f.json) {
    nlohmann::json j = {{"schema_version", cli::kJsonSchemaVersion}, {"model", model.name}, {"cluster", cluster.name}, {"nodes", cluster.nodes}, {"points", tuner::whatif_json(points)}};
    if (!scaling.empty()) j["scaling"] = scaling;
    if (!f.csv.empty()) j["csv"] = f.csv;
    if (!f.plot.empty()) j["plot"] = f.plot;
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (f.by_layout)
    fmt::print("slicetune whatif: {} — each point re-tuned; 1d: any strategy, 1d megatron: without overlap, 2d / 2.5d: SUMMA grids\n\n{}",
               title, tuner::whatif_layout_table(points));
  else
    fmt::print("slicetune whatif: {} — each point re-tuned; baseline = best plan without overlap (Megatron)\n\n{}", title,
               tuner::whatif_table(points));
  if (!f.csv.empty()) fmt::print("\nwrote {}\n", f.csv);
  if (!f.plot.empty()) fmt::print("{}drew {}\n", f.csv.empty() ? "\n" : "", f.plot);
}

void run_whatif(const WhatIfFlags& f) {
  const cli::SearchProcesses procs;
  procs.guard([&] { whatif(f, procs); });
}

const bool registered = cli::register_command(30, "whatif", "re-tune over a sweep of cluster/model parameters (baseline vs tuned; under mpirun -np N each " "point's screening is split over N processes)", [](CLI::App* cmd) {
  auto f = std::make_shared<WhatIfFlags>();
  std::string keys;
  for (const auto& [k, what] : tuner::sweep_keys()) keys += "\n  " + k + ": " + what;
  cli::add_search_flags(cmd, *f);
  cmd->footer(cli::kRangeHelp);
  cmd->add_option("--sweep", f->sweeps, "KEY=V1,V2,... (repeatable; every combination is tuned). Keys:" + keys)->required();
  cmd->add_option("--csv", f->csv, "write the table as CSV");
  cmd->add_option("--plot", f->plot, "draw tokens/s of baseline and tuned plan with gnuplot (FILE.png or FILE.svg)");
  cmd->add_flag("--by-layout", f->by_layout,
                "the best plan of each tensor-parallel layout (1d, 1d megatron, 2d, 2.5d) at each point and which wins; the CSV and "
                "chart follow (one line per layout). Strong scaling: --sweep nodes=... with --global-batch; weak scaling: with "
                "--sweep global_batch_per_gpu=N");
  cmd->add_flag("--json", f->json, "print one JSON object instead of the table (each point has its layouts and winners)");
  cmd->callback([f] { run_whatif(*f); });
});

}  // namespace
