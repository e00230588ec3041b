// defines: executor::cpu::wait_polling (how the CPU backend's communication threads complete MPI
//          requests), executor::cpu::Watchdog, executor::FaultError
#pragma once
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

namespace executor {

/// @brief A fault of the job rather than of its input: a peer rank stopped answering, an MPI or
/// device call failed. Seen by one rank; the CLI prints it from that rank and aborts the job.
class FaultError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace cpu {

/// @brief How long an exchange may make no progress before the job is aborted (0: never).
/// `describe` names the exchange and the ranks it waits on; it is only called on a timeout.
struct Watchdog {
  std::chrono::milliseconds timeout{0};
  std::function<std::string()> describe;
  /// Polled while waiting: a fault seen elsewhere in the rank (another stream) ends this wait too.
  std::function<void()> check;
};

/// Completes `n` non-blocking MPI requests the way the CPU backend's communication threads do:
/// polling with MPI_Testall, sleeping between polls (backing off from 2 to 50 us). With as many
/// ranks as cores, a blocking (busy-polling) MPI call would keep the rank's compute thread off its
/// core while the collective waits for the peer. The profiler times collectives through this too.
/// With a watchdog, an exchange not complete after `timeout` throws FaultError (the requests are
/// left pending: the job is about to be aborted).
inline void wait_polling(int n, MPI_Request* requests, const Watchdog& watchdog = {}) {
  const auto start = std::chrono::steady_clock::now();
  for (int us = 2, polls = 0;; us = std::min(50, us * 2), ++polls) {
    int complete = 0;
    const int err = MPI_Testall(n, requests, &complete, MPI_STATUSES_IGNORE);
    if (err != MPI_SUCCESS) throw FaultError("MPI_Testall failed with MPI error " + std::to_string(err));
    if (complete) return;
    if (watchdog.timeout.count() > 0 && (polls & 63) == 0) {
      if (watchdog.check) watchdog.check();
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > watchdog.timeout)
        throw FaultError(fmt::format("{} made no progress for {:.1f} s (watchdog, --watchdog-s; is that rank stopped, hung or dead?)",
                                     watchdog.describe ? watchdog.describe() : std::string("an MPI exchange"),
                                     std::chrono::duration<double>(waited).count()));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
}

/// @brief The world ranks of `comm` other than this one, as "rank 1" / "ranks 1, 3".
std::string peers_of(MPI_Comm comm);

}  // namespace cpu
}  // namespace executor
