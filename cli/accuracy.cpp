// slicetune accuracy: every calibration row predicted vs measured (docs/accuracy.md).
#include <fmt/format.h>

#include <iostream>

#include "cli/command.hpp"
#include "hardware/atomic_write.hpp"
#include "sim/accuracy.hpp"

namespace {

struct AccuracyFlags {
  std::string shared = "../shared";
  std::string out;
};

void run_accuracy(const AccuracyFlags& f) {
  const auto report = sim::evaluate_accuracy(f.shared, true);
  const std::string md = sim::accuracy_markdown(report);
  if (f.out.empty()) {
    std::cout << md;
    return;
  }
  hardware::write_file_atomically(f.out, md);
  fmt::print("wrote {}\n", f.out);
}

const bool registered = cli::register_command(80, [](CLI::App& app) {
  auto f = std::make_shared<AccuracyFlags>();
  auto* cmd = app.add_subcommand("accuracy", "predict every row of the calibration set and write the accuracy report");
  cmd->add_option("--shared", f->shared, "folder holding calibration/ (the project's shared/)")->capture_default_str();
  cmd->add_option("--out", f->out, "write the markdown report here (default: print it)");
  cmd->callback([f] { run_accuracy(*f); });
});

}  // namespace
