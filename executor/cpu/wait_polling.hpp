// defines: executor::cpu::wait_polling (how the CPU backend's communication threads complete MPI requests)
#pragma once
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace executor::cpu {
/// Completes `n` non-blocking MPI requests the way the CPU backend's communication threads do:
/// polling with MPI_Testall, sleeping between polls (backing off from 2 to 50 us). With as many
/// ranks as cores, a blocking (busy-polling) MPI call would keep the rank's compute thread off its
/// core while the collective waits for the peer. The profiler times collectives through this too.
inline void wait_polling(int n, MPI_Request* requests) {
  for (int us = 2;; us = std::min(50, us * 2)) {
    int complete = 0;
    const int err = MPI_Testall(n, requests, &complete, MPI_STATUSES_IGNORE);
    if (err != MPI_SUCCESS) throw std::runtime_error("MPI_Testall failed with MPI error " + std::to_string(err));
    if (complete) return;
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
}
}  // namespace executor::cpu
