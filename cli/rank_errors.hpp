// defines: cli::on_every_rank (how a command running under mpirun reports errors: once, from the
//          rank that saw them)
#pragma once
#include <cstdio>
#include <exception>

#include "common/config_error.hpp"
#include "executor/mpi_plugin.hpp"

namespace cli {

/// @brief Runs `body` on this rank of an MPI job. A common::ConfigError is bad input that every
/// rank finds alike (flags, files, the plan): it is rethrown, and main prints it from rank 0 only.
/// Any other error (a watchdog timeout, an MPI or device failure) is this rank's own: it is
/// printed once, from this rank ("rank N: ..."), and the job is aborted, since the other ranks may
/// be waiting on this one in an exchange that will never complete.
template <class F>
void on_every_rank(const executor::mpi_plugin::Session& mpi, F&& body) {
  try {
    body();
  } catch (const common::ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    if (mpi.size() == 1) throw;
    std::fprintf(stderr, "slicetune: error: rank %d: %s\n", mpi.rank(), e.what());
    std::fflush(stderr);
    mpi.abort(3);
  }
}

}  // namespace cli
