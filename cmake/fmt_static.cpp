// fmt's compiled part as a static library (st_fmt), for the slicetune program's static link
// (SLICETUNE_STATIC_RUNTIME, CMakeLists.txt): Debian ships fmt compiled only as a shared library,
// and its headers hold the implementation (format-inl.h). This translation unit compiles that
// implementation and the template instances the headers declare extern (format.h) or call without
// defining (the float formatter, vformat_to), as fmt's own library build does.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;

}  // namespace detail
FMT_END_NAMESPACE
