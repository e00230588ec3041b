// defines: hardware::make_profiled_cost_model (CostModel from a measured profile), make_cost_model
//          (analytic or profiled, the factory commands use), apply_profile_overrides
#pragma once
#include <iosfwd>
#include <memory>
#include <string>

#include "hardware/cost_model.hpp"
#include "hardware/profile.hpp"

namespace hardware {

/// @brief `cluster` with what the profile measured about the host and interference put in place:
/// host.launch_us (CPU backend: every stack, the CPU executor has one dispatch loop; CUDA: `cpp`) and
/// interference (sm_comm_slowdown from the measured collective slowdown; hbm_amplification solved so
/// the engine's rates_beside reproduces the measured GEMM slowdown beside the measured collective).
ClusterSpec apply_profile_overrides(ClusterSpec cluster, const Profile& profile);

/// @brief A cost model that prices operations from the profile's tables: exact where a shape was
/// measured, interpolated in log space between measured sizes (GEMMs: trilinear over the (m, n, k) grid
/// on throughput of the tile-padded problem, so tile boundaries stay visible), and the analytic
/// model of the same cluster outside the measured range. Each kind of fallback (GEMM, attention,
/// element-wise, optimizer, collective) is reported once on `notes` (stderr by default).
/// Never returns null. Thread-safe for concurrent const calls.
/// Measured kernels are priced as measured whatever the stack; the analytic fallback prices as `stack` runs them.
std::unique_ptr<CostModel> make_profiled_cost_model(const ClusterSpec& cluster, Profile profile, std::ostream* notes = nullptr,
                                                    Stack stack = Stack::cpp);

/// @brief The factory commands use: analytic when `profile_path` is empty, else the profiled model
/// over load_profile(profile_path) (with the profile's overrides applied to `cluster`).
std::unique_ptr<CostModel> make_cost_model(const ClusterSpec& cluster, const std::string& profile_path, Stack stack);

}  // namespace hardware
