// defines: hardware::Profile (measured cost tables of one machine, the profile file), ProfileInfo,
//          GemmPoint, AttentionPoint, ElementwisePoint, OptimizerPoint, CollectivePoint,
//          InterferenceMeasurement, HostMeasurement, load_profile, parse_profile, write_profile,
//          format_profile, kProfileVersion
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/yaml_node.hpp"
#include "hardware/cluster.hpp"
#include "hardware/ops.hpp"

namespace hardware {

/// The profile file format version this build reads and writes. A file of another version is
/// refused (tables change meaning between versions; re-run `slicetune profile`).
inline constexpr int kProfileVersion = 1;

/// @brief Where and how a profile was measured (its provenance).
struct ProfileInfo {
  std::string backend;   ///< cpu | cuda
  std::string device;    ///< "AMD EPYC 7B13" / "NVIDIA H200"
  std::string host;      ///< hostname
  std::string date;      ///< UTC, ISO 8601
  int ranks = 1;         ///< processes (GPUs) the collectives ran over
  bool quick = false;    ///< measured with --quick (smaller grids, fewer iterations)
  std::string command;   ///< the command line that produced it
  std::map<std::string, std::string> libraries;  ///< name -> version (openblas, mpi, cuda, nccl ...)
};

/// One GEMM measurement: C(m, n) = A(m, k) B(k, n), mean time per call, averaged over ranks.
struct GemmPoint {
  common::DType dtype = common::DType::fp32;
  std::int64_t m = 0, n = 0, k = 0;
  double us = 0;
};

/// One attention-core measurement; the profiled model interpolates in executed FLOPs.
struct AttentionPoint {
  common::DType dtype = common::DType::fp32;
  bool backward = false;
  std::int64_t batch = 0, heads = 0, s = 0, head_dim = 0;  ///< causal, s_q = s_kv = s
  double us = 0;
};

/// One element-wise measurement: `kind` over `elements` (ElementwiseOp::elements: the kernel's
/// output elements, in the dtype the backend computes in). Kind "stream" is a plain y += x sweep,
/// used for kinds without their own rows.
struct ElementwisePoint {
  std::string kind;
  bool backward = false;
  std::int64_t elements = 0;
  double us = 0;
};

struct OptimizerPoint {
  std::int64_t params = 0;
  double us = 0;
};

/// One collective measurement over `ranks` processes on `nodes` nodes, nccl-tests style.
struct CollectivePoint {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int ranks = 1, nodes = 1;
  std::int64_t bytes = 0;
  double us = 0;

  double algbw_gb_s() const { return static_cast<double>(bytes) / (us * 1e-6) / 1e9; }
  double busbw_gb_s() const;
};

/// @brief A GEMM alone vs beside a running collective, and the collective alone vs beside the GEMM.
struct InterferenceMeasurement {
  GemmPoint gemm;                 ///< the GEMM (us = alone)
  CollectivePoint collective;     ///< the collective (us = alone)
  double gemm_beside_us = 0;      ///< the GEMM while the collective runs
  double collective_beside_us = 0;

  double compute_slowdown() const { return gemm_beside_us / gemm.us - 1.0; }
  double comm_slowdown() const { return 1.0 - collective.us / collective_beside_us; }
};

/// @brief Host time to issue one task on this backend (overrides the cluster's host.launch_us).
struct HostMeasurement {
  double launch_us = 0;
  std::string method;  ///< what was timed
  /// CPU backend: time a collective's consumer loses to the thread hand-offs around it (compute
  /// thread -> communication thread -> compute thread), beyond the collective itself.
  std::optional<double> collective_handoff_us;
  std::string handoff_method;
};

/// @brief A whole profile: provenance, the machine as a cluster (the analytic fallback's parameters),
/// and the measured tables. Value type; load -> format gives the identical text.
struct Profile {
  int version = kProfileVersion;
  ProfileInfo info;
  /// The profiled machine in configs/clusters/ form; its text is kept verbatim so that a round
  /// trip reproduces it. `cluster` is that text parsed.
  common::YamlNode cluster_node;
  ClusterSpec cluster;
  /// GEMM: requested dtype -> dtype the backend really computes in (CPU: bf16 runs as fp32).
  std::map<common::DType, common::DType> runs_as;
  int gemm_tile_m = 1, gemm_tile_n = 1;  ///< the kernel's tile: sizes are padded up to it
  /// The GEMM grid's axes: every (m, n, k) of their product is measured for each dtype in `gemm`;
  /// other points (a model's exact shapes) are used where asked for exactly.
  std::vector<std::int64_t> grid_m, grid_n, grid_k;
  std::vector<GemmPoint> gemm;
  std::vector<AttentionPoint> attention;
  std::vector<ElementwisePoint> elementwise;
  std::vector<OptimizerPoint> optimizer;
  std::vector<CollectivePoint> collectives;
  /// CPU backend (optional): each collective issued the way the executor issues it (non-blocking,
  /// completed by its sleeping poll loop on a communication thread) while another thread of the
  /// rank computes, timed start to end on the communication thread as the executor times a task.
  /// The executor always runs collectives so; where this covers a size, the profiled model uses it.
  std::vector<CollectivePoint> collectives_beside_compute;
  std::optional<InterferenceMeasurement> interference;
  std::optional<HostMeasurement> host;

  std::string source;  ///< file it was loaded from ("" if built in memory)
};

/// @brief Reads a profile file (a path, or the name of one under configs/profiles/). Throws common::ConfigError naming the file and key on any problem, and a
/// clear "version N, this build reads version 1" message for a file of another version.
Profile load_profile(const std::string& name_or_path);
Profile parse_profile(const std::string& text, const std::string& source);
/// @brief The profile as YAML text (deterministic: the same Profile gives the same bytes).
std::string format_profile(const Profile& p);
/// @brief Writes format_profile(p) atomically.
void write_profile(const std::string& path, const Profile& p);

/// @brief Parses `node` (a configs/clusters/-style mapping) into a cluster spec.
ClusterSpec cluster_from_node(const common::YamlNode& node, const std::string& source);

}  // namespace hardware
