// defines: tests::check_same_report (two StepReports of one plan equal figure for figure, task times
//          included, to the picosecond) - for the engine's shortcuts that must change nothing
//          (EngineOptions::share_runs, fast_forward)
#pragma once

#include <doctest/doctest.h>

#include "sim/engine.hpp"

namespace tests {

/// CHECKs every figure of `a` against `b`: step and micro-batch time, compute, exposed
/// communication, idle, the event count, each rank's figures and stream busy times, and each task's
/// start and end when the reports carry timelines. Returns the number of task times that differ.
inline std::size_t check_same_report(const sim::StepReport& a, const sim::StepReport& b) {
  CHECK(a.step_time == b.step_time);
  CHECK(a.micro_batch_time == b.micro_batch_time);
  CHECK(a.compute == b.compute);
  CHECK(a.exposed_comm == b.exposed_comm);
  CHECK(a.idle == b.idle);
  CHECK(a.events == b.events);
  REQUIRE(a.ranks.size() == b.ranks.size());
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    CHECK(a.ranks[r].compute == b.ranks[r].compute);
    CHECK(a.ranks[r].exposed_comm == b.ranks[r].exposed_comm);
    CHECK(a.ranks[r].idle == b.ranks[r].idle);
    REQUIRE(a.ranks[r].streams.size() == b.ranks[r].streams.size());
    for (std::size_t s = 0; s < a.ranks[r].streams.size(); ++s) CHECK(a.ranks[r].streams[s].busy == b.ranks[r].streams[s].busy);
  }
  REQUIRE(a.timelines.size() == b.timelines.size());
  std::size_t differ = 0;
  for (std::size_t r = 0; r < a.timelines.size(); ++r) {
    REQUIRE(a.timelines[r].timing.size() == b.timelines[r].timing.size());
    for (std::size_t i = 0; i < a.timelines[r].timing.size(); ++i)
      differ += a.timelines[r].timing[i].start != b.timelines[r].timing[i].start || a.timelines[r].timing[i].end != b.timelines[r].timing[i].end;
  }
  CHECK(differ == 0);
  return differ;
}

}  // namespace tests
