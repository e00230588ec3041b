#include "executor/cpu/wait_polling.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>
#include <vector>

namespace executor::cpu {

std::string peers_of(MPI_Comm comm) {
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_size(group, &n);
  std::vector<int> local(static_cast<std::size_t>(n)), global(static_cast<std::size_t>(n));
  std::iota(local.begin(), local.end(), 0);
  MPI_Group_translate_ranks(group, n, local.data(), world, global.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  std::vector<int> others;
  for (int r : global)
    if (r != me) others.push_back(r);
  if (others.empty()) return "no other rank";
  return fmt::format("{} {}", others.size() == 1 ? "rank" : "ranks", fmt::join(others, ", "));
}

}  // namespace executor::cpu
