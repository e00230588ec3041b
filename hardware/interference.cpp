#include "hardware/interference.hpp"

namespace hardware {

double compute_rate_beside_comm(const InterferenceSpec& spec, double hbm_bytes_per_s, double hbm_util, double comm_sm_fraction,
                                double comm_wire_bytes_per_s) {
  const double sm = spec.sm_contention ? comm_sm_fraction : 0.0;
  const double hbm_pressure = spec.hbm_amplification * comm_wire_bytes_per_s / hbm_bytes_per_s;
  const double slow = (1.0 - hbm_util) * sm + hbm_util * hbm_pressure;
  return 1.0 / (1.0 + slow);
}

double comm_rate_beside_compute(const InterferenceSpec& spec, double hbm_util) { return 1.0 - spec.comm_slowdown * hbm_util; }

}  // namespace hardware
