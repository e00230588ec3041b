#include "common/threads.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc systems
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#if defined(__linux__) && defined(__GLIBC__)
#include <pthread.h>
#include <sched.h>
#endif

namespace common {

void start_detached_thread(std::function<void()> body) {
#if defined(__linux__) && defined(__GLIBC__)
  struct Start {
    std::function<void()> body;
    cpu_set_t allowed;  // the creator's CPUs, which the thread takes back as it starts
  };
  cpu_set_t allowed;
  const int here = sched_getcpu();
  if (here >= 0 && here < CPU_SETSIZE && sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_ISSET(here, &allowed) &&
      CPU_COUNT(&allowed) > 1) {
    cpu_set_t others = allowed;
    CPU_CLR(here, &others);
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) == 0) {
      auto start = std::make_unique<Start>(Start{std::move(body), allowed});
      int rc = -1;  // -1: the hint not given (the attribute refused)
      pthread_t thread;
      if (pthread_attr_setaffinity_np(&attr, sizeof others, &others) == 0)
        rc = pthread_create(
            &thread, &attr,
            [](void* arg) -> void* {
              const std::unique_ptr<Start> s(static_cast<Start*>(arg));
              sched_setaffinity(0, sizeof s->allowed, &s->allowed);  // placed: from here the kernel's choice
              s->body();
              return nullptr;
            },
            start.get());
      pthread_attr_destroy(&attr);
      if (rc == 0) {
        start.release();  // the thread's now
        pthread_detach(thread);
        return;
      }
      if (rc > 0) throw std::system_error(rc, std::generic_category(), "cannot start a thread");
      body = std::move(start->body);
    }
  }
#endif
  std::thread(std::move(body)).detach();
}

}  // namespace common
