// slicetune: argument parsing and printing only; the logic lives in the library folders.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <map>

#include "cli/command.hpp"
#include "common/config_reader.hpp"
#include "common/memory_reuse.hpp"

namespace cli {
std::multimap<int, CommandSetup>& registry() {
  static std::multimap<int, CommandSetup> r;
  return r;
}
}  // namespace cli

int main(int argc, char** argv) {
  common::keep_freed_memory();
  CLI::App app{"slicetune: plan, simulate, tune and run sliced (Domino) tensor-parallel LLM training"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");
  app.set_version_flag("--version", fmt::format("slicetune {} (JSON schema_version {})", SLICETUNE_VERSION, cli::kJsonSchemaVersion),
                       "print the version and exit");
  for (auto& [order, setup] : cli::registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const cli::CommandFailed& e) {
    std::fprintf(stderr, "slicetune: %s\n", e.what());
    return 1;
  } catch (const common::ConfigError& e) {
    std::fprintf(stderr, "slicetune: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "slicetune: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
