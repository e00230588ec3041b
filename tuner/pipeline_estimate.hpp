// defines: tuner::PassTimes, replay_schedule (a pipelined step's passes replayed in their schedule's
//          order with measured pass and transfer times: the tuner's screening estimate of pipelined
//          plans; Evaluator::pipeline_estimate in pipeline_estimate.cpp measures the times)
#pragma once
#include <vector>

#include "sim/plan.hpp"

namespace tuner {

/// @brief What one micro-batch costs on each virtual stage v = 0 .. pp x vp - 1, in picoseconds.
struct PassTimes {
  std::vector<double> fwd, bwd;            ///< a forward / backward pass of one micro-batch through v
  /// micro-batch 0's forward through v, where it differs (ZeRO's parameter gathers at the step's
  /// start share the GPU with it); empty: fwd
  std::vector<double> fwd_first;
  std::vector<double> send_fwd, send_bwd;  ///< v's activation to v + 1 / its input gradient to v - 1
  std::vector<double> tail;                ///< per pipeline rank: after its last backward (DP reduction, optimizer)
};

/// @brief The step of `micro_batches` micro-batches when every rank runs sim::pipeline_order of its
/// schedule one pass at a time: a forward of v waits for the forward of v - 1 and its transfer, a
/// backward of v for the backward of v + 1 and its transfer (the last virtual stage: for its own
/// forward); with `blocking` transfers the sender's next pass also waits for its send. Returns each
/// rank's end (its last pass + tail). The critical path of the schedule's dependency graph - a
/// replay, not a bubble formula: with uniform passes and free transfers it gives (m + pp - 1)(F + B).
std::vector<double> replay_schedule(sim::PipelineSchedule schedule, int pp, int vp, int micro_batches, const PassTimes& t, bool blocking);

}  // namespace tuner
