// defines: common::checked_add, checked_mul (int64 arithmetic that refuses to overflow),
//          common::fits_int64 (a double that converts to int64 without undefined behaviour),
//          common::duration_out_of_range (the error for simulated time beyond its range)
#pragma once
#include <cstdint>
#include <string>

namespace common {

/// @brief Throws common::ConfigError ("simulated time", ...) for a duration that is not finite
/// or beyond limits::kMaxDurationPs. `ps` is the value that was asked for.
[[noreturn]] void duration_out_of_range(double ps);
/// @brief Throws common::ConfigError naming `what` for an int64 overflow.
[[noreturn]] void int64_overflow(const char* what, std::int64_t a, std::int64_t b, char op);

/// True when `v` is finite and strictly inside int64's range (a static_cast is then defined).
inline bool fits_int64(double v) { return v > -9.2233720368547748e18 && v < 9.2233720368547748e18; }

inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) [[unlikely]] int64_overflow(what, a, b, '+');
  return r;
}
inline std::int64_t checked_sub(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) [[unlikely]] int64_overflow(what, a, b, '-');
  return r;
}
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) [[unlikely]] int64_overflow(what, a, b, '*');
  return r;
}

}  // namespace common
