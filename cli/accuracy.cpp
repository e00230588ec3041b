// slicetune accuracy: every calibration row predicted vs measured (docs/accuracy.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/command.hpp"
#include "common/atomic_write.hpp"
#include "validate/accuracy.hpp"

namespace {

struct AccuracyFlags {
  std::string calibration = "data/calibration";
  std::string out;
};

void run_accuracy(const AccuracyFlags& f) {
  common::check_output_path(f.out, "--out");
  std::error_code ec;
  if (!std::filesystem::is_directory(f.calibration, ec))
    cli::bad_flag("--calibration", fmt::format("'{}' is not a folder (run from the repository root, or give the folder holding the calibration files)", f.calibration));
  const auto report = validate::evaluate_accuracy(f.calibration, true);
  const std::string md = validate::accuracy_markdown(report);
  if (f.out.empty()) {
    std::cout << md;
    return;
  }
  common::write_file_atomically(f.out, md);
  fmt::print("wrote {}\n", f.out);
}

const bool registered = cli::register_command(80, [](CLI::App& app) {
  auto f = std::make_shared<AccuracyFlags>();
  auto* cmd = app.add_subcommand("accuracy", "predict every row of the calibration set and write the accuracy report");
  cmd->add_option("--calibration", f->calibration, "folder holding the calibration files (the repository's data/calibration)")->capture_default_str();
  cmd->add_option("--out", f->out, "write the markdown report here (default: print it)");
  cmd->callback([f] { run_accuracy(*f); });
});

}  // namespace
