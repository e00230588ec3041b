#include "executor/mpi_session.hpp"

#include <mpi.h>

#include <cstdlib>

#include "common/check.hpp"

namespace executor {

MpiSession::MpiSession() {
  int initialised = 0;
  MPI_CHECK(MPI_Initialized(&initialised));
  if (!initialised) {
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
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
  if (owner_) MPI_Finalize();
}

}  // namespace executor
