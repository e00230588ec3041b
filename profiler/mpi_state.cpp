// The profiler's MPI life cycle (init_mpi_if_needed, mpi_rank, finish): one translation unit, so that
// the CUDA plug-in's copy of the profiler links without the CPU profiler.
#include <mpi.h>

#include <cstdlib>

#include "common/check.hpp"
#include "common/config_error.hpp"
#include "profiler/cuda_profiler.hpp"
#include "profiler/profiler.hpp"

namespace profiler {
namespace {
bool g_we_initialised_mpi = false;
}  // namespace

void init_mpi_if_needed() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) return;
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  g_we_initialised_mpi = true;
  if (provided < MPI_THREAD_SERIALIZED)
    throw common::ConfigError("--backend cpu", "", "the MPI library gives no MPI_THREAD_SERIALIZED; the interference test needs it");
}

int mpi_rank() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void abort_job(int code) {
  int initialised = 0, finalized = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalized);
  if (initialised && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void finish() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialised_mpi && !finalized) MPI_Finalize();
}

}  // namespace profiler
