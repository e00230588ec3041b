// defines: common::Table (aligned terminal tables with a units row, nccl-tests style)
#pragma once
#include <string>
#include <vector>

namespace common {

/// @brief A text table: header row, units row, then data rows; numeric-looking cells right-aligned.
class Table {
 public:
  Table(std::vector<std::string> header, std::vector<std::string> units);
  Table& row(std::vector<std::string> cells);
  std::string str() const;

 private:
  std::vector<std::string> header_, units_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace common
