#include "cli/app.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <thread>

#include "cli/command.hpp"
#include "common/config_error.hpp"

namespace cli {

std::multimap<int, CommandSetup>& registry() {
  static std::multimap<int, CommandSetup> r;
  return r;
}

namespace {

/// Bad input under mpirun: every rank finds it, rank 0 prints it. The others wait a moment before
/// they exit non-zero, because the launcher ends the whole job at the first non-zero exit and
/// rank 0 would otherwise be killed before it has printed the error.
int bad_input(const char* what, const char* hint) {
  if (launcher_rank() == 0) {
    std::fprintf(stderr, "slicetune: error: %s%s\n", what, hint);
  } else {
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  return 2;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"slicetune: plan, simulate, tune and run sliced (Domino) tensor-parallel LLM training"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");
  app.set_version_flag("--version", fmt::format("slicetune {} (JSON schema_version {})", SLICETUNE_VERSION, kJsonSchemaVersion),
                       "print the version and exit");
  for (auto& [order, setup] : registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints help and exits 0; any other parse error is one line naming the flag, exit 2
    if (e.get_exit_code() == 0 || dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e))
      return app.exit(e);
    return bad_input(e.what(), " (slicetune --help lists the commands and flags)");
  } catch (const CommandFailed& e) {
    // the command ran and its answer is "no" (e.g. check found a rule broken): its own message, exit 1
    std::fprintf(stderr, "slicetune: %s\n", e.what());
    return 1;
  } catch (const common::ConfigError& e) {
    // bad input: under mpirun every rank finds the same problem; one line, from rank 0
    return bad_input(e.what(), "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "slicetune: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace cli
