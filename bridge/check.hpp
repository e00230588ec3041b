// defines: bridge::Severity, Finding, CheckInput, CheckRule, check_rules, rules_markdown, preflight, check_table
//          (will a framework accept this plan, does it fit, which environment does it need)
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bridge/framework.hpp"
#include "bridge/imported_plan.hpp"
#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace bridge {

/// error: the framework refuses it or silently runs something else; warning: it runs, but not as
/// the plan assumes; env: an environment setting it needs; ok: a check that passed (shown with --all).
enum class Severity : std::uint8_t { error, warning, env, ok };
std::string_view to_string(Severity s);

struct Finding {
  Severity severity = Severity::error;
  std::string rule;     ///< id of the rule ("heads-tp", "domino-pp", ...)
  std::string message;  ///< what is wrong with this plan, with its numbers
  std::string source;   ///< where the framework enforces it (file and function / message)
};

/// @brief One documented rule: which frameworks, what it checks, where the framework enforces it.
struct CheckRule {
  std::string id;
  std::vector<Framework> frameworks;
  std::string what;
  std::string source;
};
/// @brief Every rule preflight applies (docs/bridge.md lists them): the fixed ones, then those the
/// registered strategies' declarations imply (bridge::declared_rules).
std::vector<CheckRule> check_rules();
/// @brief check_rules() as the Markdown table of docs/bridge.md (rule | frameworks | reason: source),
/// printed by `slicetune check --rules`.
std::string rules_markdown();

struct CheckInput {
  const sim::ModelSpec& model;
  const hardware::ClusterSpec& cluster;
  const sim::Plan& plan;  ///< filled (sim::fill_plan), not necessarily feasible for slicetune
  const ImportedPlan* imported = nullptr;      ///< the framework's own flags, when the plan came from them
  std::map<std::string, std::string> environment;  ///< the launch environment to check (e.g. the current one)
  double reserve_gb = 0.0;  ///< extra memory to keep free beyond the breakdown (which has the CUDA context, NCCL buffers and the cluster's fragmentation reserve)
};

/// @brief Every finding for `f`, errors first. Memory is estimated from the plan's step graph when
/// slicetune can build it (a plan its own check_plan accepts); otherwise that is a finding too.
std::vector<Finding> preflight(Framework f, const CheckInput& in);
bool has_errors(const std::vector<Finding>& findings);
/// @brief One line per finding: severity, rule, message, source.
std::string check_table(const std::vector<Finding>& findings);

}  // namespace bridge
