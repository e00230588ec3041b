// The profiler's MPI life cycle (init_mpi_if_needed, mpi_rank, finish): one translation unit, so that
// the CUDA plug-in's copy of the profiler links without the CPU profiler.
#include <mpi.h>

#include <cstdlib>

// LeakSanitizer's interface, when it is linked in (sanitizer builds); null otherwise
extern "C" __attribute__((weak)) void __lsan_do_leak_check();
extern "C" __attribute__((weak)) void __lsan_disable();
extern "C" __attribute__((weak)) void __lsan_enable();

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
  if (__lsan_disable) __lsan_disable();  // Open MPI's own start-up allocations (executor/mpi_session.cpp)
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (__lsan_enable) __lsan_enable();
  MPI_CHECK(rc);
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
  if (g_we_initialised_mpi && !finalized) {
    // LeakSanitizer: check before MPI_Finalize unloads Open MPI's components (executor/mpi_session.cpp)
    if (__lsan_do_leak_check) __lsan_do_leak_check();
    MPI_Finalize();
  }
}

}  // namespace profiler
