// defines: MPI_CHECK, CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK, common::check_failed
// One header for the error-check macros of every backend. Each macro evaluates the call once and,
// on failure, throws std::runtime_error naming the call, the library's error string and file:line.
// The macros name library functions only when expanded, so this header includes none of them:
// a CPU-only build includes it without CUDA, and a build without MPI without mpi.h.
#pragma once
#include <stdexcept>
#include <string>

namespace common {

/// @brief Throws "`call` failed at file:line: detail" (std::runtime_error).
[[noreturn]] inline void check_failed(const char* call, const std::string& detail, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + detail);
}

}  // namespace common

#define MPI_CHECK(call)                                                                                  \
  do {                                                                                                   \
    const int mpi_check_rc_ = (call);                                                                    \
    if (mpi_check_rc_ != MPI_SUCCESS) {                                                                  \
      char mpi_check_msg_[MPI_MAX_ERROR_STRING];                                                         \
      int mpi_check_len_ = 0;                                                                            \
      MPI_Error_string(mpi_check_rc_, mpi_check_msg_, &mpi_check_len_);                                  \
      ::common::check_failed(#call, std::string(mpi_check_msg_, mpi_check_len_), __FILE__, __LINE__);   \
    }                                                                                                    \
  } while (0)

#define CUDA_CHECK(call)                                                                                 \
  do {                                                                                                   \
    const cudaError_t cuda_check_err_ = (call);                                                          \
    if (cuda_check_err_ != cudaSuccess)                                                                  \
      ::common::check_failed(#call, cudaGetErrorString(cuda_check_err_), __FILE__, __LINE__);            \
  } while (0)

#define CUBLAS_CHECK(call)                                                                               \
  do {                                                                                                   \
    const cublasStatus_t cublas_check_st_ = (call);                                                      \
    if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      ::common::check_failed(#call, cublasGetStatusString(cublas_check_st_), __FILE__, __LINE__);        \
  } while (0)

#define NCCL_CHECK(call)                                                                                 \
  do {                                                                                                   \
    const ncclResult_t nccl_check_rc_ = (call);                                                          \
    if (nccl_check_rc_ != ncclSuccess)                                                                   \
      ::common::check_failed(#call, ncclGetErrorString(nccl_check_rc_), __FILE__, __LINE__);             \
  } while (0)
