// The collective and GEMM models against closed forms.
#include <doctest/doctest.h>

#include "hardware/collective_sweep.hpp"
#include "common/config_reader.hpp"
#include "hardware/gemm_model.hpp"

using namespace hardware;
using namespace common;

TEST_CASE("ring Simple all-reduce on 8 H100 tends to 18 links x 20.6 GB/s = 370.8 GB/s busbw") {
  // NCCL's ring bus bandwidth is nChannels x per-channel NVLink bw = 18 x 20.6 GB/s; at 8 GB the
  // ~60 us of latency is 0.15 % of the time.
  const auto c = load_cluster("dgx-h100");
  CollectiveOptions ring{.algo = CollectiveAlgo::ring, .proto = CollectiveProto::simple};
  const auto row = collective_row(c, CollectiveOp{.bytes = std::int64_t{8} << 30, .ranks = 8}, ring);
  CHECK(row.busbw_GBps == doctest::Approx(370.8).epsilon(0.005));
}

TEST_CASE("NCCL's choice moves from LL to NVLS as the size grows; small messages use fewer channels") {
  const auto c = load_cluster("dgx-h100");
  const auto small = collective_row(c, CollectiveOp{.bytes = 1024, .ranks = 8});
  CHECK(small.proto == "ll");
  CHECK(small.channels == 1);  // 1 KB < 2 channels x 512 threads x 8 B
  const auto big = collective_row(c, CollectiveOp{.bytes = std::int64_t{1} << 30, .ranks = 8});
  CHECK(big.algo == "nvls");
  CHECK(big.channels == 16);
}

TEST_CASE("A100 all-reduce is plausible: ring only (no NVLS), busbw below 12 x 20 GB/s = 240 GB/s") {
  // Published DGX A100 nccl-tests all-reduce busbw is about 230 GB/s at 1 GB.
  const auto c = load_cluster("dgx-a100");
  const auto row = collective_row(c, CollectiveOp{.bytes = std::int64_t{1} << 30, .ranks = 8});
  CHECK(row.algo == "ring");
  CHECK(row.busbw_GBps > 220);
  CHECK(row.busbw_GBps <= 240);
}

TEST_CASE("forcing an algorithm that does not apply is refused with the flag named") {
  const auto c = load_cluster("dgx-a100");  // no NVLS
  CHECK_THROWS_AS(collective_row(c, CollectiveOp{.bytes = 1 << 20, .ranks = 8}, {.algo = CollectiveAlgo::nvls}), ConfigError);
  CHECK(parse_bytes("64M", "--min-bytes") == (std::int64_t{64} << 20));
  CHECK_THROWS_AS(parse_bytes("64Q", "--min-bytes"), ConfigError);
}

TEST_CASE("GEMM 2048^3 bf16 on H100: one wave of 128x256 tiles, closed form") {
  // 16 x 8 = 128 tiles <= 132 SMs: one wave. Per SM 989.4 TFLOP/s x 0.80 / 132; a tile does
  // 2 x 128 x 256 x 2048 FLOP -> 22.383 us, + 2.2 us tile overhead (fitted, docs/accuracy.md) + 1.5 us
  // kernel latency = 26.083 us.
  const auto c = load_cluster("dgx-h100");
  const auto e = estimate_gemm(c.gpu, GemmOp{.m = 2048, .n = 2048, .k = 2048, .dtype = DType::bf16});
  CHECK(e.tile_m * e.tile_n == 128 * 256);
  CHECK(e.waves == 1);
  const double expect_s = 2.0 * 128 * 256 * 2048 / (989.4e12 * 0.80 / 132) + 2.2e-6 + 1.5e-6;
  CHECK(e.seconds == doctest::Approx(expect_s).epsilon(1e-9));
}

TEST_CASE("row slicing costs GEMM efficiency: GPT-3 13B QKV at TP=8, whole vs half micro-batch") {
  // m = 16384 tokens -> 128 x 8 = 1024 tiles = 7.76 waves (8); a half slice m = 8192 -> 512 tiles
  // = 3.88 waves (4): the same 3 % wave-quantization loss, so each half takes ~half the time; four
  // slices (m = 4096, 256 tiles = 1.94 -> 2 waves) and eight (m = 2048, 1 wave at 128/132) lose a
  // little more to the fixed per-kernel latency, never gaining.
  const auto c = load_cluster("dgx-h100");
  auto tf = [&](std::int64_t m) { return estimate_gemm(c.gpu, GemmOp{.m = m, .n = 1920, .k = 5120, .dtype = DType::fp16}).tflops(); };
  CHECK(tf(8192) <= tf(16384) * 1.0001);
  CHECK(tf(4096) <= tf(8192) * 1.0001);
  CHECK(tf(2048) < tf(16384));
  // a skinny N (192 columns) wastes a 256-wide tile: below the square shape's efficiency
  const double skinny = estimate_gemm(c.gpu, GemmOp{.m = 802816, .n = 192, .k = 768, .dtype = DType::fp8}).tflops();
  CHECK(skinny < 0.65 * c.gpu.peak_flops(DType::fp8) / 1e12);
}

TEST_CASE("cluster files: the nccl section is strict") {
  auto text = common::read_text_file(std::string(SLICETUNE_SOURCE_DIR) + "/configs/clusters/dgx-h100.yaml");
  text += "  surprise: 1\n";  // an unknown key under nccl (the last section)
  CHECK_THROWS_AS(parse_cluster(text, "x.yaml"), ConfigError);
}

TEST_CASE("cluster files: gemm_efficiency is one fraction for all dtypes or one per dtype") {
  auto text = common::read_text_file(std::string(SLICETUNE_SOURCE_DIR) + "/configs/clusters/dgx-h100.yaml");
  const auto pos = text.find("  gemm_efficiency: {");
  REQUIRE(pos != std::string::npos);
  text.replace(pos, text.find('\n', pos) - pos, "  gemm_efficiency: 0.6");
  const auto c = parse_cluster(text, "x.yaml");
  CHECK(c.gpu.gemm_eff(DType::fp8) == doctest::Approx(0.6));
  CHECK(c.gpu.gemm_eff(DType::bf16) == doctest::Approx(0.6));
}
