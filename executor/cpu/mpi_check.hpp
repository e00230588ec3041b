// defines: MPI_CHECK (throws std::runtime_error with file:line and the MPI error string)
#pragma once
#include <mpi.h>

#include <stdexcept>
#include <string>

namespace executor {
[[noreturn]] inline void mpi_fail(int err, const char* call, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + std::string(msg, len));
}
}  // namespace executor

#define MPI_CHECK(call)                                                                 \
  do {                                                                                  \
    const int mpi_check_err_ = (call);                                                  \
    if (mpi_check_err_ != MPI_SUCCESS) ::executor::mpi_fail(mpi_check_err_, #call, __FILE__, __LINE__); \
  } while (0)
