#include "executor/mpi_session.hpp"

#include <mpi.h>

#include <cstdlib>

// LeakSanitizer's interface, when it is linked in (sanitizer builds); null otherwise
extern "C" __attribute__((weak)) void __lsan_do_leak_check();
extern "C" __attribute__((weak)) void __lsan_disable();
extern "C" __attribute__((weak)) void __lsan_enable();

#include "common/check.hpp"

namespace executor {

MpiSession::MpiSession() {
  int initialised = 0;
  MPI_CHECK(MPI_Initialized(&initialised));
  if (!initialised) {
    int provided = 0;
    // LeakSanitizer: what Open MPI allocates while it loads, tries and unloads its components is its
    // own (unloaded, those frames cannot even be named in a suppression); ignore it
    if (__lsan_disable) __lsan_disable();
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (__lsan_enable) __lsan_enable();
    MPI_CHECK(rc);
    owner_ = true;
    if (provided < MPI_THREAD_MULTIPLE) throw std::runtime_error("MPI: this MPI library does not provide MPI_THREAD_MULTIPLE");
  }
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
}

void MpiSession::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; if it ever did, do not run destructors that may wait on peers
}

MpiSession::~MpiSession() {
  if (!owner_) return;
  // Under LeakSanitizer: check for leaks now, while Open MPI's own allocations are still reachable;
  // MPI_Finalize unloads its components, after which their allocations show up as leaks from
  // unknown modules. (This also ends LeakSanitizer's check at exit, which would only see those.)
  if (__lsan_do_leak_check) __lsan_do_leak_check();
  MPI_Finalize();
}

}  // namespace executor
