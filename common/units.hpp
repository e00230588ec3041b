// defines: common::Duration (simulated time, integer picoseconds), common::DType
#pragma once
#include <cmath>
#include <compare>
#include <cstdint>
#include <string_view>

#include "common/checked.hpp"
#include "common/limits.hpp"

namespace common {

/// @brief A span of simulated time in integer picoseconds (ns would round away sub-ns GEMM tiles).
/// Integer ticks keep event ordering exact and results bit-for-bit reproducible.
struct Duration {
  std::int64_t ps = 0;

  static constexpr Duration from_ps(std::int64_t v) { return Duration{v}; }
  /// Rounds up so that no positive cost becomes zero. A value that is not finite or beyond
  /// limits::kMaxDurationPs (11.6 days) throws common::ConfigError instead of wrapping around.
  static Duration from_ns(double ns) {
    const double ps = std::ceil(ns * 1000.0);
    if (!(ps >= -limits::kMaxDurationPs && ps <= limits::kMaxDurationPs)) [[unlikely]] duration_out_of_range(ps);
    return Duration{static_cast<std::int64_t>(ps)};
  }
  static Duration from_us(double us) { return from_ns(us * 1e3); }
  static Duration from_s(double s) { return from_ns(s * 1e9); }

  constexpr double ns() const { return static_cast<double>(ps) * 1e-3; }
  constexpr double us() const { return static_cast<double>(ps) * 1e-6; }
  constexpr double ms() const { return static_cast<double>(ps) * 1e-9; }
  constexpr double s() const { return static_cast<double>(ps) * 1e-12; }

  // Checked: an overflow throws common::ConfigError rather than wrapping to a negative time.
  Duration operator+(Duration o) const { return {checked_add(ps, o.ps, "simulated time")}; }
  Duration operator-(Duration o) const { return {checked_sub(ps, o.ps, "simulated time")}; }
  Duration& operator+=(Duration o) { ps = checked_add(ps, o.ps, "simulated time"); return *this; }
  Duration& operator-=(Duration o) { ps = checked_sub(ps, o.ps, "simulated time"); return *this; }
  Duration operator*(std::int64_t k) const { return {checked_mul(ps, k, "simulated time")}; }
  constexpr auto operator<=>(const Duration&) const = default;
};

/// @brief Element types of tensors and of GEMM inputs.
enum class DType : std::uint8_t { fp32, bf16, fp16, fp8 };

constexpr int dtype_bytes(DType t) {
  switch (t) {
    case DType::fp32: return 4;
    case DType::bf16: return 2;
    case DType::fp16: return 2;
    case DType::fp8: return 1;
  }
  return 4;
}
constexpr std::string_view to_string(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp8: return "fp8";
  }
  return "?";
}
bool parse_dtype(std::string_view s, DType& out);

}  // namespace common
