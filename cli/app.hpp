// defines: cli::run (the slicetune command line: parse, run the command, turn errors into exit codes)
#pragma once

namespace cli {

/// @brief Parses `argv` with every registered command and runs the chosen one. Returns the exit
/// status: 0, 2 for bad input (one line on stderr naming the flag, file or key; under mpirun
/// printed by rank 0 only), 1 for any other error. `--help` prints help and returns 0.
int run(int argc, char** argv);

}  // namespace cli
