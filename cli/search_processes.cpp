#include "cli/search_processes.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#ifdef SLICETUNE_HAVE_EXECUTOR
#include <mpi.h>

#include "cli/rank_errors.hpp"
#include "common/check.hpp"
#include "executor/mpi_session.hpp"
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
  executor::MpiSession session;
};

SearchProcesses::SearchProcesses() {
  if (launcher_size() <= 1) return;
  mpi_ = std::make_unique<Mpi>();
  dist_.rank = mpi_->session.rank();
  dist_.size = mpi_->session.size();
  dist_.allgather = [](const std::string& mine) {
    if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::runtime_error("distributed search: a round's estimates exceed 2 GB");
    int size = 0;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    const int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
    MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD));
    long long total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<std::size_t>(r)] = static_cast<int>(total);
      total += counts[static_cast<std::size_t>(r)];
      if (total > std::numeric_limits<int>::max()) throw std::runtime_error("distributed search: a round's estimates exceed 2 GB");
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_CHECK(MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD));
    std::vector<std::string> parts;
    for (int r = 0; r < size; ++r)
      parts.push_back(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                                 static_cast<std::size_t>(counts[static_cast<std::size_t>(r)])));
    return parts;
  };
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
