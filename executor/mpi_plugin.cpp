// The MPI plug-in's entry points (libslicetune_mpi.so, loaded by common::mpi_plugin_symbol; the
// program's side is executor/mpi_plugin_client.cpp): the executor's MPI session, backends and
// training loop, the distributed search's all-gather and the profiler. Only these are exported. Each
// one that can throw hands its exception over as data (`err`, common/plugin_error.hpp): the program
// has a C++ runtime of its own.
#include <mpi.h>

#include <limits>
#include <stdexcept>

#include "common/check.hpp"
#include "common/plugin_error.hpp"
#include "executor/backend.hpp"
#include "executor/mpi_session.hpp"
#include "executor/run.hpp"
#include "profiler/profiler.hpp"

#define SLICETUNE_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

/// A new executor::MpiSession (`*rank`, `*size`: its rank and world size); the caller closes it.
SLICETUNE_PLUGIN_EXPORT void* slicetune_mpi_session_open(int* rank, int* size, common::PluginError* err) {
  executor::MpiSession* s = nullptr;
  common::catch_into(err, [&] {
    s = new executor::MpiSession();
    *rank = s->rank();
    *size = s->size();
  });
  return s;
}

SLICETUNE_PLUGIN_EXPORT void slicetune_mpi_session_close(void* session) {
  common::PluginError ignored;  // called from a destructor: nothing to report to
  common::catch_into(&ignored, [&] { delete static_cast<executor::MpiSession*>(session); });
}

SLICETUNE_PLUGIN_EXPORT void slicetune_mpi_session_abort(void* session, int code) {
  static_cast<executor::MpiSession*>(session)->abort(code);
}

/// A new backend (the caller owns it and deletes it through Backend's virtual destructor).
SLICETUNE_PLUGIN_EXPORT executor::Backend* slicetune_mpi_make_backend(executor::BackendKind kind, const executor::BackendOptions* options,
                                                                      common::PluginError* err) {
  executor::Backend* b = nullptr;
  common::catch_into(err, [&] { b = executor::make_backend(kind, *options).release(); });
  return b;
}

SLICETUNE_PLUGIN_EXPORT void slicetune_mpi_train(const sim::StepGraph* graph, executor::Backend* backend,
                                                 const executor::RunOptions* options, bool capture_grads,
                                                 executor::RunResult* out, common::PluginError* err) {
  common::catch_into(err, [&] { *out = executor::train(*graph, *backend, *options, capture_grads); });
}

/// Every process's `*mine` in rank order over MPI_COMM_WORLD into `*out`.
SLICETUNE_PLUGIN_EXPORT void slicetune_mpi_allgather(const std::string* mine, std::vector<std::string>* out, common::PluginError* err) {
  common::catch_into(err, [&] {
  if (mine->size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error("distributed search: a round's estimates exceed 2 GB");
  int size = 0;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const int n = static_cast<int>(mine->size());
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD));
  long long total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<std::size_t>(r)] = static_cast<int>(total);
    total += counts[static_cast<std::size_t>(r)];
    if (total > std::numeric_limits<int>::max()) throw std::runtime_error("distributed search: a round's estimates exceed 2 GB");
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_CHECK(MPI_Allgatherv(mine->data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD));
  out->clear();
  for (int r = 0; r < size; ++r)
    out->push_back(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                              static_cast<std::size_t>(counts[static_cast<std::size_t>(r)])));
  });
}

SLICETUNE_PLUGIN_EXPORT void slicetune_mpi_profile_measure(const profiler::Options* options, hardware::Profile* out, common::PluginError* err) {
  common::catch_into(err, [&] { *out = profiler::measure(*options); });
}

SLICETUNE_PLUGIN_EXPORT int slicetune_mpi_profile_rank(common::PluginError* err) {
  int r = 0;
  common::catch_into(err, [&] { r = profiler::mpi_rank(); });
  return r;
}

SLICETUNE_PLUGIN_EXPORT void slicetune_mpi_profile_finish(common::PluginError* err) {
  common::catch_into(err, [&] { profiler::finish(); });
}

SLICETUNE_PLUGIN_EXPORT void slicetune_mpi_profile_abort(int code) { profiler::abort_job(code); }
