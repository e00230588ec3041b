// defines: executor::MpiSession (MPI_Init_thread with MPI_THREAD_MULTIPLE for the process's lifetime)
#pragma once

namespace executor {

/// @brief Initialises MPI (MPI_THREAD_MULTIPLE: communication streams are threads) unless it
/// already is, and finalises it when destroyed if this object initialised it. Works under
/// mpirun / srun and as a singleton (one rank). Move-only; one per process.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// @brief Ends the whole job now (MPI_Abort on MPI_COMM_WORLD with `code`): for a fault one rank
  /// saw while the others may be waiting on it in an exchange that will never complete.
  [[noreturn]] void abort(int code) const;

 private:
  bool owner_ = false;
  int rank_ = 0, size_ = 1;
};

}  // namespace executor
