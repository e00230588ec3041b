#include "common/table.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace common {

namespace {
bool numeric(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == 'e' || c == ',' || c == '%' || c == 'x' || c == 'K' || c == 'M' || c == 'B' || c == 'G'))
      return false;
  return std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+';
}
// display width of UTF-8 text (counts code points)
std::size_t width(const std::string& s) {
  std::size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}
}  // namespace

Table::Table(std::vector<std::string> header, std::vector<std::string> units) : header_(std::move(header)), units_(std::move(units)) {
  units_.resize(header_.size());
}

Table& Table::row(std::vector<std::string> cells) {
  if (cells.size() != header_.size()) throw std::invalid_argument("Table::row: wrong number of cells");
  rows_.push_back(std::move(cells));
  return *this;
}

std::string Table::str() const {
  std::vector<std::size_t> w(header_.size(), 0);
  auto fit = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  };
  fit(header_);
  fit(units_);
  for (const auto& r : rows_) fit(r);
  std::vector<bool> right(header_.size(), true);
  for (std::size_t i = 0; i < header_.size(); ++i)
    for (const auto& r : rows_)
      if (!numeric(r[i]) && !r[i].empty()) right[i] = false;
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::size_t pad = w[i] - width(r[i]);
      if (i) out += "  ";
      if (right[i]) out += std::string(pad, ' ') + r[i];
      else out += r[i] + (i + 1 < r.size() ? std::string(pad, ' ') : "");
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  bool any_units = false;
  for (const auto& u : units_) any_units |= !u.empty();
  if (any_units) out += line(units_);
  for (const auto& r : rows_) out += line(r);
  return out;
}

}  // namespace common
