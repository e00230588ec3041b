// defines: hardware::compute_rate_beside_comm, comm_rate_beside_compute (how communication and
//          computation slow each other when they overlap on one GPU)
#pragma once
#include "hardware/cluster.hpp"

namespace hardware {

/// @brief Speed (fraction of solo) of a compute kernel while collectives run beside it.
/// `hbm_util`: fraction of HBM bandwidth the kernel streams alone (0 = compute-bound, 1 = memory-
/// bound); `comm_sm_fraction`: share of the SMs the collectives' CTAs hold; `comm_wire_bytes_per_s`:
/// bytes/s the collectives put on the wire. The slowdown is
///   slow = (1 - hbm_util) x comm_sm_fraction            (a compute-bound kernel loses SMs)
///        + hbm_util x hbm_amplification x wire / HBM    (a memory-bound one loses HBM bandwidth)
/// and the speed is 1 / (1 + slow).
double compute_rate_beside_comm(const InterferenceSpec& spec, double hbm_bytes_per_s, double hbm_util, double comm_sm_fraction,
                                double comm_wire_bytes_per_s);

/// @brief Speed (fraction of its link-limited rate) of a collective while a compute kernel that
/// streams `hbm_util` of HBM runs beside it: 1 - comm_slowdown x hbm_util.
double comm_rate_beside_compute(const InterferenceSpec& spec, double hbm_util);

}  // namespace hardware
