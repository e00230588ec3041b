// Faults under mpirun: a stopped rank is caught by the watchdog, a killed or terminated job ends
// at once without a partial file, and errors print once.
#ifdef SLICETUNE_HAVE_EXECUTOR
#include <doctest/doctest.h>
#include <signal.h>

#include <filesystem>
#include <thread>

#include "tests/hardening/process.hpp"

using namespace hardening;
namespace fs = std::filesystem;

namespace {

/// Starts a long 2-rank tiny run and waits until rank 0 has printed `step 3/`, so that both ranks
/// are inside the step loop; returns false if it did not get there within 60 s.
bool started(Launched& job) {
  for (int i = 0; i < 6000; ++i) {
    if (job.err().find("step   3/") != std::string::npos) return true;
    if (job.wait(0.01)) return false;
  }
  return false;
}

std::vector<std::string> long_run(const std::vector<std::string>& extra) {
  std::vector<std::string> args{"run", "--model", "tiny", "--tp", "2", "--strategy", "domino", "--row-slices", "2", "--steps", "100000"};
  args.insert(args.end(), extra.begin(), extra.end());
  return mpirun_argv(2, args);
}

}  // namespace

TEST_CASE("a SIGSTOPped rank: the job exits non-zero within the watchdog time, naming the rank waited on") {
  Scratch s;
  // watchdog 2 s: rank 0 waits on rank 1 in a TP collective (or the step barrier) for 2 s, prints
  // one error naming rank 1 and aborts the job; mpirun then ends the stopped rank too
  Launched job(long_run({"--watchdog-s", "2", "--out", s / "run.json"}), s / "job");
  REQUIRE(started(job));
  const pid_t rank1 = rank_pid(job.pid, 1);
  REQUIRE(rank1 > 0);
  REQUIRE(::kill(rank1, SIGSTOP) == 0);
  const auto stopped = std::chrono::steady_clock::now();
  const bool ended = job.wait(30);
  const double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  if (!ended) job.kill_all();
  const std::string err = job.err();
  INFO(err);
  REQUIRE(ended);
  CHECK(job.exit_code() != 0);
  // 2 s of watchdog + the abort; generous for a loaded 2-core machine, far below "forever"
  CHECK(after_s >= 2.0);
  CHECK(after_s < 12.0);
  CHECK(count_lines_with(err, "slicetune: error: rank 0: ") == 1);
  CHECK(err.find("waiting on rank 1") != std::string::npos);
  CHECK(err.find("made no progress for 2.") != std::string::npos);
  CHECK_FALSE(fs::exists(s / "run.json"));
  // nothing is left running (the stopped rank was killed: gone, or a zombie not yet reaped)
  CHECK_FALSE(alive(rank1));
}

TEST_CASE("SIGTERM to mpirun or SIGKILL to a rank ends the whole job within seconds, with no partial output") {
  for (int signal : {SIGTERM, SIGKILL}) {
    CAPTURE(signal);
    Scratch s;
    Launched job(long_run({"--out", s / "run.json", "--trace", s / "trace.json"}), s / "job");
    REQUIRE(started(job));
    const pid_t rank1 = rank_pid(job.pid, 1);
    REQUIRE(rank1 > 0);
    // SIGTERM: what a scheduler sends the launcher; SIGKILL: a rank dying (OOM killer)
    REQUIRE(::kill(signal == SIGTERM ? job.pid : rank1, signal) == 0);
    const auto sent = std::chrono::steady_clock::now();
    const bool ended = job.wait(30);
    const double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    if (!ended) job.kill_all();
    INFO(job.err());
    REQUIRE(ended);
    CHECK(job.exit_code() != 0);
    CHECK(after_s < 5.0);
    // no output file and no temporary next to where it would be
    for (const auto& e : fs::directory_iterator(s.dir)) CHECK(e.path().filename().string().rfind("job.", 0) == 0);
  }
}

TEST_CASE("under mpirun an input error prints once, from rank 0") {
  // every rank finds the same bad flag; before, each of the N ranks printed the same line
  const auto r = run(mpirun_argv(3, {"run", "--model", "tiny", "--strategy", "fastest"}), 60);
  CHECK(r.code != 0);
  CHECK(count_lines_with(r.err, "slicetune: error:") == 1);
  CHECK(r.err.find("slicetune: error: --strategy: expected none | domino, got 'fastest'") != std::string::npos);
  // an error found after MPI started (the plan does not match the ranks) also prints once
  const auto p = run(mpirun_argv(3, {"run", "--model", "tiny", "--tp", "2"}), 60);
  CHECK(p.code != 0);
  CHECK(count_lines_with(p.err, "slicetune: error:") == 1);
}
#endif
