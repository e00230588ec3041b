// common::ThreadFront (each thread's copy of what it read from a shared cache) and the search's
// thread pool (tuner::parallel_for): the answers are the shared cache's, per cache instance, and
// every index of every job runs once, on any number of threads, with errors passed to the caller.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_front.hpp"
#include "tests/hardening/process.hpp"
#include "hardware/cost_model.hpp"
#include "tuner/pricing_cache.hpp"
#include "tuner/search.hpp"

namespace {
struct IntHash {
  std::size_t operator()(int k) const { return static_cast<std::size_t>(k); }
};
struct TestFront;
using Front = common::ThreadFront<int, std::int64_t, IntHash, TestFront>;
}  // namespace

TEST_CASE("a thread front asks the shared cache once per key and owner, and keeps owners apart") {
  const std::uint64_t a = common::unique_id(), b = common::unique_id();
  CHECK(a != b);
  CHECK(a != 0);
  int asked = 0;
  auto shared = [&](std::int64_t v) {
    return [&asked, v] {
      ++asked;
      return v;
    };
  };
  CHECK(Front::get(a, 7, shared(70)) == 70);
  CHECK(Front::get(a, 7, shared(-1)) == 70);  // the thread's copy: the shared cache is not asked
  CHECK(asked == 1);
  // the same key of another cache is that cache's value, not a's
  CHECK(Front::get(b, 7, shared(71)) == 71);
  CHECK(asked == 2);
  CHECK(Front::get(a, 7, shared(-1)) == 70);
  CHECK(Front::get(b, 7, shared(-1)) == 71);
  CHECK(asked == 2);
  // more owners than slots (kSlots = 4): the oldest slot is emptied and asked again, never mixed up
  std::vector<std::uint64_t> owners{a, b};
  for (std::size_t i = 0; i < Front::kSlots; ++i) owners.push_back(common::unique_id());
  // a and b still hold their own values (70, 71); the new owners get theirs (100 + i)
  for (std::size_t i = 0; i < owners.size(); ++i)
    CHECK(Front::get(owners[i], 7, shared(100 + static_cast<std::int64_t>(i))) == (i == 0 ? 70 : i == 1 ? 71 : 100 + static_cast<std::int64_t>(i)));
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t i = 2; i < owners.size(); ++i) CHECK(Front::get(owners[i], 7, shared(100 + static_cast<std::int64_t>(i))) == 100 + static_cast<std::int64_t>(i));
  // a and b were emptied by the newer owners: asked again, each its own value
  asked = 0;
  CHECK(Front::get(a, 7, shared(70)) == 70);
  CHECK(Front::get(b, 7, shared(71)) == 71);
  CHECK(asked == 2);
}

TEST_CASE("each thread has its own front: another thread asks the shared cache itself") {
  const std::uint64_t owner = common::unique_id();
  std::atomic<int> asked{0};
  auto lookup = [&] { return Front::get(owner, 3, [&] { ++asked; return std::int64_t{30}; }); };
  CHECK(lookup() == 30);
  CHECK(lookup() == 30);
  std::int64_t other = 0;
  std::thread t([&] { other = lookup() + lookup(); });
  t.join();
  CHECK(other == 60);
  CHECK(asked == 2);  // once on this thread, once on the other
}

TEST_CASE("pricing caches over different models answer each with its own model's prices, alternately and on threads") {
  const auto c = hardware::load_cluster("dgx-h100");
  const auto eager = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  const auto a100 = hardware::make_analytic_cost_model(hardware::load_cluster("dgx-a100"), hardware::Stack::eager);
  const hardware::GemmOp g{.m = 4096, .n = 5120, .k = 1280, .dtype = common::DType::bf16, .batch = 1};
  const hardware::AttentionOp att{.batch = 2, .heads = 20, .kv_heads = 20, .s_q = 2048, .s_kv = 2048, .head_dim = 128};
  REQUIRE(eager->gemm(g).time != a100->gemm(g).time);  // H100 and A100 price the same GEMM apart
  REQUIRE(eager->attention(att).time != a100->attention(att).time);
  // six caches, more than a thread front keeps (4), asked in turn: each answers as its own base
  std::vector<std::unique_ptr<tuner::PricingCache>> caches;
  for (int i = 0; i < 6; ++i) caches.push_back(std::make_unique<tuner::PricingCache>(i % 2 ? *a100 : *eager));
  auto check_all = [&] {
    bool ok = true;
    for (int pass = 0; pass < 3; ++pass)
      for (int i = 0; i < 6; ++i) {
        const hardware::CostModel& base = i % 2 ? *a100 : *eager;
        ok = ok && caches[static_cast<std::size_t>(i)]->gemm(g).time == base.gemm(g).time;
        ok = ok && caches[static_cast<std::size_t>(i)]->attention(att).time == base.attention(att).time;
      }
    return ok;
  };
  CHECK(check_all());
  std::vector<char> ok(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < ok.size(); ++t) threads.emplace_back([&, t] { ok[t] = check_all(); });
  for (auto& t : threads) t.join();
  for (char o : ok) CHECK(o == 1);
}

TEST_CASE("parallel_for runs every index of every job once, however short the jobs, and passes an item's error on") {
  // many short jobs in a row: the helpers wait for the next job awake, the caller for the helpers'
  // last items (tuner/search.cpp's Pool); a lost wake-up would hang here, a double run count twice
  for (int threads : {2, 3}) {
    std::vector<std::atomic<int>> runs(16);
    for (int job = 0; job < 2000; ++job) {
      const std::size_t n = 1 + static_cast<std::size_t>(job) % runs.size();
      tuner::parallel_for(n, threads, [&](std::size_t i) { runs[i].fetch_add(1, std::memory_order_relaxed); });
    }
    // index i is in the jobs whose n > i: 2000 jobs, n = 1 + job % 16
    for (std::size_t i = 0; i < runs.size(); ++i) {
      int expected = 0;
      for (int job = 0; job < 2000; ++job) expected += 1 + static_cast<std::size_t>(job) % runs.size() > i ? 1 : 0;
      CHECK(runs[i].load() == expected);
    }
    // an item that throws: the caller gets its error; the pool runs the next job whole
    CHECK_THROWS_WITH_AS(tuner::parallel_for(64, threads,
                                             [](std::size_t i) {
                                               if (i == 40) throw std::runtime_error("item 40 failed");
                                             }),
                         "item 40 failed", std::runtime_error);
    std::atomic<int> after{0};
    tuner::parallel_for(64, threads, [&](std::size_t) { after.fetch_add(1); });
    CHECK(after.load() == 64);
  }
}

namespace {
/// The process's thread count (proc(5): /proc/self/status "Threads:"), -1 if unreadable.
int threads_now() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}
}  // namespace

TEST_CASE("threads started ahead (start_threads) exist before the first job and take parallel_for's jobs") {
  // The slicetune program starts the search's threads as tune and whatif begin, each faulting in
  // the first bytes of its heap (common::prefault_heap: a no-op where the heap is not advised, as in
  // this test program). Checked in a process of its own, where no earlier case has started the
  // pool: the case below
  ::setenv("SLICETUNE_TEST_FRESH_POOL", "1", 1);
  const auto child = hardening::run({"/proc/self/exe", "--test-case=threads started ahead in a process of its own*", "--no-version", "--no-intro"});
  ::unsetenv("SLICETUNE_TEST_FRESH_POOL");
  CAPTURE(child.out);
  CAPTURE(child.err);
  CHECK(child.code == 0);
  CHECK(child.out.find("1 passed") != std::string::npos);
}

TEST_CASE("threads started ahead in a process of its own: 2 helpers before any job, every index once, items on 2 threads or more") {
  if (!std::getenv("SLICETUNE_TEST_FRESH_POOL")) {
    MESSAGE("run as a process of its own by the test case above");
    return;
  }
  const int before = threads_now();
  tuner::start_threads(3, std::size_t{2} << 20);
  tuner::start_threads(3, std::size_t{2} << 20);  // again: nothing more to start
  // the two helpers exist now, before any parallel_for (without start_threads: none more). At
  // least 2 more than `before`: ThreadSanitizer's runtime starts a thread of its own with the
  // process's second thread
  const int started = threads_now();
  CHECK(before >= 1);
  CHECK(started - before >= 2);
  std::vector<std::atomic<int>> runs(64);
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> seen;
  tuner::parallel_for(runs.size(), 3, [&](std::size_t i) {
    runs[i].fetch_add(1);
    std::unique_lock lock(mu);
    seen.insert(std::this_thread::get_id());
    cv.notify_all();
    // the first items wait (up to 10 s) for a second thread to take an item
    if (i < 2) cv.wait_for(lock, std::chrono::seconds(10), [&] { return seen.size() >= 2; });
  });
  for (const auto& r : runs) CHECK(r.load() == 1);
  CHECK(seen.size() >= 2);
  CHECK(threads_now() == started);  // the job started no thread of its own
}
