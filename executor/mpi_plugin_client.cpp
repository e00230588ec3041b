// The slicetune program's side of the MPI plug-in (executor/mpi_plugin.hpp): each call finds its entry
// point in libslicetune_mpi.so (common::mpi_plugin_symbol, which loads it on first use) and calls it.
// The entry points are in executor/mpi_plugin.cpp; what they throw comes back as data and is thrown
// again here (common/plugin_error.hpp).
#include "executor/mpi_plugin.hpp"

#include <cstdlib>

#include "common/plugin.hpp"
#include "common/plugin_error.hpp"
#include "profiler/profiler.hpp"

namespace executor::mpi_plugin {
namespace {

template <class Fn>
Fn entry(const char* name) {
  return reinterpret_cast<Fn>(common::mpi_plugin_symbol(name));
}

}  // namespace

Session::Session() {
  common::PluginError err;
  session_ = entry<void* (*)(int*, int*, common::PluginError*)>("slicetune_mpi_session_open")(&rank_, &size_, &err);
  common::rethrow_plugin_error(err);
}

Session::~Session() { entry<void (*)(void*)>("slicetune_mpi_session_close")(session_); }

void Session::abort(int code) const {
  entry<void (*)(void*, int)>("slicetune_mpi_session_abort")(session_, code);
  std::_Exit(code);  // the plug-in's MPI_Abort does not return
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  common::PluginError err;
  std::unique_ptr<Backend> b(
      entry<Backend* (*)(BackendKind, const BackendOptions*, common::PluginError*)>("slicetune_mpi_make_backend")(kind, &options, &err));
  common::rethrow_plugin_error(err);
  return b;
}

RunResult train(const sim::StepGraph& graph, Backend& backend, const RunOptions& options, bool capture_grads) {
  RunResult r;
  common::PluginError err;
  entry<void (*)(const sim::StepGraph*, Backend*, const RunOptions*, bool, RunResult*, common::PluginError*)>("slicetune_mpi_train")(
      &graph, &backend, &options, capture_grads, &r, &err);
  common::rethrow_plugin_error(err);
  return r;
}

std::vector<std::string> allgather(const std::string& mine) {
  std::vector<std::string> all;
  common::PluginError err;
  entry<void (*)(const std::string*, std::vector<std::string>*, common::PluginError*)>("slicetune_mpi_allgather")(&mine, &all, &err);
  common::rethrow_plugin_error(err);
  return all;
}

hardware::Profile measure_profile(const profiler::Options& options) {
  hardware::Profile p;
  common::PluginError err;
  entry<void (*)(const profiler::Options*, hardware::Profile*, common::PluginError*)>("slicetune_mpi_profile_measure")(&options, &p, &err);
  common::rethrow_plugin_error(err);
  return p;
}

int profile_rank() {
  common::PluginError err;
  const int r = entry<int (*)(common::PluginError*)>("slicetune_mpi_profile_rank")(&err);
  common::rethrow_plugin_error(err);
  return r;
}

void profile_finish() {
  common::PluginError err;
  entry<void (*)(common::PluginError*)>("slicetune_mpi_profile_finish")(&err);
  common::rethrow_plugin_error(err);
}

void profile_abort(int code) {
  entry<void (*)(int)>("slicetune_mpi_profile_abort")(code);
  std::_Exit(code);  // profiler::abort_job does not return
}

}  // namespace executor::mpi_plugin
