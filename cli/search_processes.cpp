#include "cli/search_processes.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#ifdef SLICETUNE_HAVE_EXECUTOR
#include "cli/rank_errors.hpp"
#include "executor/mpi_plugin.hpp"
#endif

namespace cli {

int launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(var)) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n >= 1 && n < (1L << 30)) return static_cast<int>(n);
    }
  return 1;
}

#ifdef SLICETUNE_HAVE_EXECUTOR

struct SearchProcesses::Mpi {
  executor::mpi_plugin::Session session;  // MPI: the MPI plug-in, loaded only under a launcher
};

SearchProcesses::SearchProcesses() {
  if (launcher_size() <= 1) return;
  mpi_ = std::make_unique<Mpi>();
  dist_.rank = mpi_->session.rank();
  dist_.size = mpi_->session.size();
  dist_.allgather = [](const std::string& mine) { return executor::mpi_plugin::allgather(mine); };
}

void SearchProcesses::guard(const std::function<void()>& body) const {
  if (!mpi_) return body();
  on_every_rank(mpi_->session, body);
}

#else

struct SearchProcesses::Mpi {};
SearchProcesses::SearchProcesses() = default;
void SearchProcesses::guard(const std::function<void()>& body) const { body(); }

#endif

SearchProcesses::~SearchProcesses() = default;

}  // namespace cli
