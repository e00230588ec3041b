#include "validate/tp_overlap_rows.hpp"

#include <fmt/format.h>

#include <regex>

#include "common/config_error.hpp"
#include "validate/calibration.hpp"

namespace validate {

using common::ConfigError;

namespace {

/// "X=4096" in `shape` as a number, if stated exactly.
std::optional<std::int64_t> dim(const std::string& shape, char name) {
  const std::regex re(std::string("\\b") + name + "=([0-9]+)\\b");
  std::smatch m;
  if (!std::regex_search(shape, m, re)) return std::nullopt;
  return std::stoll(m[1].str());
}

std::optional<double> figure(const std::string& notes, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(notes, m, std::regex(pattern))) return std::nullopt;
  return std::stod(m[1].str());
}

}  // namespace

std::vector<FluxRow> read_flux_kernel_rows(const std::string& dir) {
  const Csv csv = read_csv(dir + "/tp-overlap-measured.csv");
  std::vector<FluxRow> out;
  for (const auto& row : csv.rows) {
    const std::string& source = csv.cell(row, "source");
    if (source != "FLUX-RM" && source != "FLUX-90" && source != "FLUX-100") continue;
    const std::string& shape = csv.cell(row, "model_or_shape");
    const bool ag = shape.starts_with("AG+GEMM"), rs = shape.starts_with("GEMM+RS");
    if (!ag && !rs) continue;
    FluxRow r{.source = source};
    const std::string& hw = csv.cell(row, "hardware");
    for (const char* g : {"A800", "H800", "H100"})
      if (hw.find(g) != std::string::npos) r.gpu = g;
    if (r.gpu.empty())
      throw ConfigError(csv.path, "hardware", fmt::format("'{}' names no GPU this reader knows (A800, H800, H100)", hw));
    const std::string& par = csv.cell(row, "parallelism");
    const auto tp = figure(par, "TP=([0-9]+)");
    if (!tp || *tp < 2 || *tp > 64) throw ConfigError(csv.path, "parallelism", fmt::format("'{}' has no TP=2..64", par));
    r.label = fmt::format("{} {} ({})", hw.substr(0, hw.find(" (")), shape, source);
    if (!csv.cell(row, "baseline_value").empty()) r.baseline_ms = csv_number(csv, row, "baseline_value");
    r.overlap_ms = csv_number(csv, row, "overlap_value");
    const std::string& notes = csv.cell(row, "notes");
    r.torch_gemm_ms = figure(notes, "torch: gemm ([0-9.]+)");
    r.torch_nccl_ms = figure(notes, "\\+ nccl ([0-9.]+)");
    r.flux_exposed_ms = figure(notes, "exposed(?: comm)? ([0-9.]+)");
    const auto m = dim(shape, 'M'), k = dim(shape, 'K'), n = dim(shape, 'N');
    if (shape.find('~') != std::string::npos || !m || !k || !n) {
      r.listed_why = shape.find('~') != std::string::npos ? "K and N stated only as approximate (~8192, from a results file name)"
                                                          : "K and N not stated (the row gives M only)";
    } else {
      // FLUX's README does not state the dtype (n/s): its benchmarks default to fp16 / bf16, whose
      // peaks are equal on A100 and H100
      r.site = hardware::TpGemm{.kind = ag ? hardware::TpGemmKind::all_gather_gemm : hardware::TpGemmKind::gemm_reduce_scatter,
                                .m = *m,
                                .k = *k,
                                .n = *n,
                                .tp = static_cast<int>(*tp),
                                .dtype = common::DType::fp16};
      // The README's table came with FLUX's first sm90 kernels (bytedance/flux 775e061, unchanged to
      // the README's 239a13d): there the sm90 GEMM + reduce-scatter always adds the pulled tiles in
      // the kernel (src/reduce_scatter/sm90_reduce_scatter_utils.hpp reduce(): local_red into a
      // [M/tp, N] buffer; ths_op/gemm_reduce_scatter.cc: a sum over that one segment). Later FLUX
      // made it the fuse_reduction option, off by default (19831ca), which flux#90 and #100 ran.
      if (rs && source == "FLUX-RM" && r.gpu == "H800") r.site.reduction = hardware::RsReduction::in_kernel;
    }
    out.push_back(std::move(r));
  }
  return out;
}

hardware::ClusterSpec flux_machine(const std::string& gpu) {
  if (gpu == "H100") return hardware::load_cluster("dgx-h100");
  hardware::ClusterSpec c;
  if (gpu == "A800")
    c = hardware::load_cluster("dgx-a100");
  else if (gpu == "H800")
    c = hardware::load_cluster("dgx-h100");
  else
    throw ConfigError("tp-overlap-measured.csv", "hardware", fmt::format("no cluster for '{}'", gpu));
  // the export variants: 8 NVLink links, 400 GB/s both directions (the row's "NVLink 400GB/s")
  c.node.nvlink_links = 8;
  c.node.nvlink_bytes_per_s = 200e9;
  c.name += "-" + gpu;
  return c;
}

FluxPrediction predict_flux_row(const FluxRow& row) {
  const auto c = flux_machine(row.gpu);
  return {hardware::tp_gemm_serial(c, row.site), hardware::tp_gemm_fused(c, row.site)};
}

}  // namespace validate
