// The slicetune program's side of the MPI plug-in (executor/mpi_plugin.hpp): each call finds its entry
// point in libslicetune_mpi.so (common::mpi_plugin_symbol, which loads it on first use) and calls it.
// The entry points are in executor/mpi_plugin.cpp.
#include "executor/mpi_plugin.hpp"

#include <cstdlib>

#include "common/plugin.hpp"
#include "profiler/profiler.hpp"

namespace executor::mpi_plugin {
namespace {

template <class Fn>
Fn entry(const char* name) {
  return reinterpret_cast<Fn>(common::mpi_plugin_symbol(name));
}

}  // namespace

Session::Session() { session_ = entry<void* (*)(int*, int*)>("slicetune_mpi_session_open")(&rank_, &size_); }

Session::~Session() { entry<void (*)(void*)>("slicetune_mpi_session_close")(session_); }

void Session::abort(int code) const {
  entry<void (*)(void*, int)>("slicetune_mpi_session_abort")(session_, code);
  std::_Exit(code);  // the plug-in's MPI_Abort does not return
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  return std::unique_ptr<Backend>(
      entry<Backend* (*)(BackendKind, const BackendOptions*)>("slicetune_mpi_make_backend")(kind, &options));
}

RunResult train(const sim::StepGraph& graph, Backend& backend, const RunOptions& options, bool capture_grads) {
  RunResult r;
  entry<void (*)(const sim::StepGraph*, Backend*, const RunOptions*, bool, RunResult*)>("slicetune_mpi_train")(
      &graph, &backend, &options, capture_grads, &r);
  return r;
}

std::vector<std::string> allgather(const std::string& mine) {
  std::vector<std::string> all;
  entry<void (*)(const std::string*, std::vector<std::string>*)>("slicetune_mpi_allgather")(&mine, &all);
  return all;
}

hardware::Profile measure_profile(const profiler::Options& options) {
  hardware::Profile p;
  entry<void (*)(const profiler::Options*, hardware::Profile*)>("slicetune_mpi_profile_measure")(&options, &p);
  return p;
}

int profile_rank() { return entry<int (*)()>("slicetune_mpi_profile_rank")(); }

void profile_finish() { entry<void (*)()>("slicetune_mpi_profile_finish")(); }

void profile_abort(int code) {
  entry<void (*)(int)>("slicetune_mpi_profile_abort")(code);
  std::_Exit(code);  // profiler::abort_job does not return
}

}  // namespace executor::mpi_plugin
