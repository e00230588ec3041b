// defines: common::start_detached_thread (a thread started on another CPU than its creator's)
#pragma once

#include <functional>

namespace common {

/// @brief Runs `body` on a thread of its own, detached. Where the caller may run on more than one
/// CPU (Linux, glibc), the thread is created allowed only the CPUs other than the one the caller
/// runs on, and takes back the caller's whole set of CPUs as its first act: a placement hint, not a
/// pin - from then on the kernel moves it as it likes. Without the hint a new thread is queued on
/// its creator's CPU, and where the creator keeps that CPU busy (the slicetune program reading its
/// configs while its search threads start) it waited there for the creator's time slice: 3.5-3.9 ms
/// on this VM's Linux 6.18 with the other CPU idle, 0.4 ms with the hint (docs/benchmarks.md).
/// Elsewhere, or where the hint cannot be given, as std::thread(body).detach(). Throws
/// std::system_error where no thread can be started (as std::thread).
void start_detached_thread(std::function<void()> body);

}  // namespace common
