#include "common/checked.hpp"

#include <fmt/format.h>

#include "common/config_error.hpp"
#include "common/limits.hpp"

namespace common {

void duration_out_of_range(double ps) {
  throw ConfigError("simulated time", "",
                    fmt::format("a priced duration of {:.4g} s is not finite or beyond the simulator's range of {:.3g} s "
                                "(int64 picoseconds); check the cluster's or profile's rates and the plan's sizes",
                                ps * 1e-12, limits::kMaxDurationPs * 1e-12));
}

void int64_overflow(const char* what, std::int64_t a, std::int64_t b, char op) {
  throw ConfigError(what, "", fmt::format("{} {} {} overflows 64 bits; the inputs are too large to simulate", a, op, b));
}

}  // namespace common
