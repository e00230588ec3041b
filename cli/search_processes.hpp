// defines: cli::SearchProcesses (the processes of `mpirun -np N slicetune tune|whatif` sharing one
//          search: MPI started only under a launcher with N > 1, and the tuner's all-gather)
#pragma once
#include <memory>

#include "tuner/search.hpp"

namespace cli {

/// @brief Under a launcher that started more than one process (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
/// SLURM_NTASKS), starts MPI (executor::mpi_plugin::Session: the MPI plug-in is loaded only then) and offers tuner::Distribution
/// over MPI_COMM_WORLD; otherwise starts nothing (a plain `slicetune tune` never initialises MPI, which would cost start-up
/// time). Needs the executor (MPI); without it, always one process.
class SearchProcesses {
 public:
  SearchProcesses();
  ~SearchProcesses();
  SearchProcesses(const SearchProcesses&) = delete;
  SearchProcesses& operator=(const SearchProcesses&) = delete;

  int rank() const { return dist_.rank; }
  int size() const { return dist_.size; }
  /// rank 0 prints and writes; the others only screen
  bool prints() const { return dist_.rank == 0; }
  /// For SearchOptions::distribution.
  const tuner::Distribution& distribution() const { return dist_; }
  /// Runs `body`; an error that is not bad input is printed once from this rank and ends the job
  /// (the other processes may be waiting on this one in an all-gather).
  void guard(const std::function<void()>& body) const;

 private:
  struct Mpi;
  std::unique_ptr<Mpi> mpi_;
  tuner::Distribution dist_;
};

/// @brief The number of processes the launcher started (1 without a launcher).
int launcher_size();

}  // namespace cli
