#include "executor/mpi_session.hpp"

#include <mpi.h>

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

MpiSession::~MpiSession() {
  if (owner_) MPI_Finalize();
}

}  // namespace executor
