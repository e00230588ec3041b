// defines: common::limits (every bound on a number or size slicetune reads from a file or a flag)
//
// One place for the limits the loaders enforce, each with why. They are far above any real model
// or machine (the largest published dense models have ~100-200 layers, hidden ~25k, vocab ~256k,
// contexts ~1M tokens, batches of ~4M tokens; the largest clusters ~100k GPUs) and low enough
// that every product the planner, builder and memory model form from them fits in 64 bits:
// tensor elements <= tokens per micro-batch (2^30) x widest row (2 x ffn = 2^21) = 2^51, parameters
// <= layers (2^12) x per-layer (~2^42) < 2^55, tokens per step <= 2^36, GPUs <= 2^20 fit an int.
// docs/limits.md lists them for users.
#pragma once
#include <cstdint>

namespace common::limits {

// ---- files -------------------------------------------------------------------------------------
/// Largest input file read (model, cluster, plan, profile YAML; run JSON). The largest real ones
/// are a profile (~60 KB) and a run JSON of a 13B model (~1 MB); 64 MiB leaves 60x headroom and
/// keeps a parser's memory in the hundreds of MB at worst. Only regular files are read.
inline constexpr std::int64_t kMaxInputFileBytes = std::int64_t{64} << 20;
/// YAML nodes visited in one document, aliases expanded (an alias bomb expands exponentially).
inline constexpr std::int64_t kMaxYamlNodes = 1'000'000;
/// Lists and mappings nested in one YAML document (configs nest 4 deep; the readers walk the tree
/// recursively).
inline constexpr std::int64_t kMaxYamlDepth = 256;

// ---- model -------------------------------------------------------------------------------------
inline constexpr std::int64_t kMaxLayers = 4096;           ///< task tags hold the layer in 16 bits
inline constexpr std::int64_t kMaxHidden = 262'144;        ///< 2^18
inline constexpr std::int64_t kMaxHeads = 16'384;
inline constexpr std::int64_t kMaxFfnHidden = 1'048'576;   ///< 2^20
inline constexpr std::int64_t kMaxVocab = 16'777'216;      ///< 2^24
inline constexpr std::int64_t kMaxSeqLen = 4'194'304;      ///< 2^22 tokens

// ---- plan --------------------------------------------------------------------------------------
inline constexpr std::int64_t kMaxMicroBatch = 65'536;
inline constexpr std::int64_t kMaxGlobalBatch = 16'777'216;             ///< 2^24 sequences
inline constexpr std::int64_t kMaxTokensPerMicroBatch = std::int64_t{1} << 30;
inline constexpr std::int64_t kMaxTokensPerStep = std::int64_t{1} << 36;
/// Row slices and column chunks: task and tensor tags hold them in 8 bits (-1 = none).
inline constexpr std::int64_t kMaxRowSlices = 127;
inline constexpr std::int64_t kMaxColSlices = 127;
inline constexpr double kMaxDpBucketMb = 1e6;  ///< 1 TB: larger than any model's gradients
/// Tasks in one rank's step graph (about 200 bytes each with their tensors and edges, so ~200 MB).
/// GPT-3 175B with 8 x 4 Domino slices has ~30k; the check runs where the plan is resolved.
inline constexpr std::int64_t kMaxTasks = 1'000'000;

// ---- step-graph files (simulate --graph) ------------------------------------------------------
/// A saved graph is read within the plan limits above: at most kMaxTasks tasks, and these.
inline constexpr std::int64_t kMaxGraphTensors = 4 * kMaxTasks;  ///< the builder makes ~1.5 per task
inline constexpr std::int64_t kMaxGraphEdges = 16 * kMaxTasks;   ///< the builder makes ~3 per task
inline constexpr std::int64_t kMaxGraphOperands = 16 * kMaxTasks;  ///< tensor references of all tasks
/// Any one size in an operation's shape (GEMM m/n/k, attention lengths, heads, batch): the
/// builder's largest is the tokens of a micro-batch, 2^30.
inline constexpr std::int64_t kMaxShapeDim = kMaxTokensPerMicroBatch;
inline constexpr std::int64_t kMaxShapeElements = std::int64_t{1} << 52;  ///< element-wise elements, optimizer parameters
inline constexpr std::int64_t kMaxTensorDim = std::int64_t{1} << 40;     ///< a tensor's rows or columns

// ---- cluster -----------------------------------------------------------------------------------
inline constexpr std::int64_t kMaxNodes = 131'072;         ///< 2^17
inline constexpr std::int64_t kMaxGpusPerNode = 1024;
inline constexpr std::int64_t kMaxGpus = 1'048'576;        ///< nodes x GPUs per node, 2^20
inline constexpr std::int64_t kMaxNicsPerNode = 1024;
inline constexpr std::int64_t kMaxNvlinkLinks = 1024;
inline constexpr std::int64_t kMaxSms = 65'536;
inline constexpr double kMaxTflops = 1e6;                  ///< per GPU (B200: 2.5e3 bf16 dense)
inline constexpr double kMaxGbPerS = 1e7;                  ///< any bandwidth, GB/s or Gbit/s
inline constexpr double kMaxHbmGb = 1e6;
inline constexpr double kMaxMicroseconds = 1e7;            ///< any fixed cost in a cluster or profile file: 10 s
inline constexpr double kMaxRatio = 1e6;                   ///< amplification, oversubscription

// ---- collectives, profiles ---------------------------------------------------------------------
inline constexpr std::int64_t kMaxCollectiveBytes = std::int64_t{1} << 40;  ///< 1 TiB per collective
inline constexpr std::int64_t kMaxProfileDim = std::int64_t{1} << 24;      ///< GEMM m, n, k; attention sizes
inline constexpr std::int64_t kMaxProfileElements = std::int64_t{1} << 48;
inline constexpr double kMaxMeasuredUs = 1e12;                              ///< 11.6 days

// ---- simulated time ----------------------------------------------------------------------------
/// Simulated time is int64 picoseconds (106 days). One priced duration may be at most 1e18 ps
/// (11.6 days) so that sums of a few of them stay in range; beyond, the inputs are refused.
inline constexpr double kMaxDurationPs = 1e18;

// ---- executor ----------------------------------------------------------------------------------
inline constexpr std::int64_t kMaxSteps = 1'000'000;
inline constexpr std::int64_t kMaxThreads = 1024;

}  // namespace common::limits
