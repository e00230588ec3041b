// defines: executor::mpi_plugin (the MPI half of the executor and the profiler, in the plug-in
//          libslicetune_mpi.so beside the program: the slicetune program maps Open MPI only when a
//          command needs it - run, profile, validate running a plan, tune / whatif under mpirun -
//          so that simulate, tune, list and --help never load it; docs/benchmarks.md, start-up)
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.hpp"
#include "executor/run.hpp"
#include "hardware/profile.hpp"

namespace profiler {
struct Options;
}

namespace executor::mpi_plugin {

/// @brief executor::MpiSession in the plug-in: MPI initialised (MPI_THREAD_MULTIPLE) unless it
/// already is, finalised when destroyed if this object initialised it. One per process.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// @brief Ends the whole job now (MPI_Abort on MPI_COMM_WORLD with `code`).
  [[noreturn]] void abort(int code) const;

 private:
  void* session_ = nullptr;  ///< the plug-in's executor::MpiSession
  int rank_ = 0, size_ = 1;
};

/// @brief executor::make_backend (MPI must be initialised: a Session).
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options);

/// @brief executor::train: collective over MPI_COMM_WORLD, every rank calls it with its own graph.
RunResult train(const sim::StepGraph& graph, Backend& backend, const RunOptions& options, bool capture_grads = false);

/// @brief Every process's `mine`, in rank order, over MPI_COMM_WORLD (MPI_Allgatherv): the
/// distributed search's exchange (tuner::Distribution::allgather). Throws std::runtime_error when a
/// round exceeds 2 GB.
std::vector<std::string> allgather(const std::string& mine);

/// @brief profiler::measure (MPI initialised there if it is not yet).
hardware::Profile measure_profile(const profiler::Options& options);
/// @brief profiler::mpi_rank: this process's rank (0 while MPI is not initialised).
int profile_rank();
/// @brief profiler::finish: finalises MPI if measure_profile initialised it.
void profile_finish();
/// @brief profiler::abort_job: MPI_Abort when MPI is running, else exit with `code`.
[[noreturn]] void profile_abort(int code);

}  // namespace executor::mpi_plugin
