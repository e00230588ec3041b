#include "common/process_exit.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#if defined(__linux__)
#include <link.h>
#include <unistd.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(leak_sanitizer)
#define SLICETUNE_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLICETUNE_SANITIZED 1
#endif

namespace common {

namespace {

std::atomic<long> loaded_at_start{-1};  // -1: note_loaded_objects not called

long loaded_objects() {
#if defined(__linux__)
  long n = 0;
  dl_iterate_phdr([](dl_phdr_info*, std::size_t, void* count) { return ++*static_cast<long*>(count), 0; }, &n);
  return n;
#else
  return -1;
#endif
}

}  // namespace

void note_loaded_objects() { loaded_at_start.store(loaded_objects(), std::memory_order_relaxed); }

bool fast_exit_allowed() {
#if defined(SLICETUNE_SANITIZED) || !defined(__linux__)
  return false;
#else
  const long at_start = loaded_at_start.load(std::memory_order_relaxed);
  return at_start >= 0 && loaded_objects() == at_start;
#endif
}

void end_process(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
#if defined(__linux__)
  if (fast_exit_allowed()) ::_exit(code);
#endif
  std::exit(code);
}

}  // namespace common
