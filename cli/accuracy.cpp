// slicetune accuracy: every calibration row predicted vs measured (docs/accuracy.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/command.hpp"
#include "common/atomic_write.hpp"
#include "common/table.hpp"
#include "validate/accuracy.hpp"
#include "validate/fit.hpp"

namespace {

struct AccuracyFlags {
  std::string calibration = "data/calibration";
  std::string out;
  std::string bands;
  bool fit = false;
};

// The least-squares fits behind the cluster files' fitted constants, recomputed from the calibration
// files, beside the values the files hold.
void print_fits(const std::string& dir) {
  common::Table t({"constant", "cluster", "file", "fitted", "rows", "rms error", "fit inputs"}, {"", "", "", "", "", "%", ""});
  for (const auto& f : validate::fit_constants(dir))
    for (const auto& p : f.params)
      t.row({p.key, f.cluster, fmt::format("{:g}", p.file_value), fmt::format("{:g}", p.fitted), fmt::format("{}", f.rows),
             fmt::format("{:.1f}", 100 * f.rms_log_error), f.inputs});
  fmt::print("slicetune accuracy --fit: least squares on log(predicted / measured), grid search\n\n{}", t.str());
}

void run_accuracy(const AccuracyFlags& f) {
  common::check_output_path(f.out, "--out");
  std::error_code ec;
  if (!std::filesystem::is_directory(f.calibration, ec))
    cli::bad_flag("--calibration", fmt::format("'{}' is not a folder (run from the repository root, or give the folder holding the calibration files)", f.calibration));
  if (f.fit) {
    print_fits(f.calibration);
    return;
  }
  const auto report = validate::evaluate_accuracy(f.calibration, true);
  if (!f.bands.empty()) {
    common::write_file_atomically(f.bands, sim::step_error_bands_yaml(report.step_error_bands));
    fmt::print(stderr, "wrote {}\n", f.bands);
  }
  const std::string md = validate::accuracy_markdown(report);
  if (f.out.empty()) {
    std::cout << md;
    return;
  }
  common::write_file_atomically(f.out, md);
  fmt::print("wrote {}\n", f.out);
}

const bool registered = cli::register_command(80, "accuracy", "predict every row of the calibration set and write the accuracy report", [](CLI::App* cmd) {
  auto f = std::make_shared<AccuracyFlags>();
  cmd->add_option("--calibration", f->calibration, "folder holding the calibration files (the repository's data/calibration)")->capture_default_str();
  cmd->add_option("--out", f->out, "write the markdown report here (default: print it)");
  cmd->add_option("--bands", f->bands, "also write the out-of-sample step-error bands (configs/accuracy/step-error-bands.yaml) behind the prediction ranges");
  cmd->add_flag("--fit", f->fit, "recompute the least-squares fit of every fitted cluster-file constant from its fit inputs and print it beside the file's value");
  cmd->callback([f] { run_accuracy(*f); });
});

}  // namespace
