// defines: bridge::KnobSupport, FrameworkSupport, StrategySupport (how each framework runs each
//          registered strategy and expresses its knobs), register_support, find_support,
//          StrategyInFramework, express_strategy, ArgumentTarget, find_argument,
//          is_selecting_argument, select_strategy
//
// Export, import and check read these declarations instead of naming strategies: a new strategy
// (sim/strategy.hpp) declares here, once per framework, whether the framework runs it and, for each
// knob, the argument that carries it or the one value the framework always runs. Anything not
// declared is said ("no declaration of how ... runs it"), carried in the export's `# slicetune:`
// line so that import gives the same plan back, and reported by check as a warning.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/framework.hpp"
#include "sim/plan.hpp"
#include "sim/strategy.hpp"

namespace bridge {

/// @brief How a framework that runs a strategy expresses one of its knobs: an argument, or the one
/// value it always runs (set neither and the knob cannot be expressed: `why` says so).
struct KnobSupport {
  std::string_view key;  ///< sim::Knob::key
  /// The framework's argument carrying the value (sim::Knob::format): "--flag VALUE" in Megatron-LM
  /// and DeepSpeed-Domino, "key=VALUE" in NeMo's Hydra overrides. The Megatron-style importer reads
  /// it back.
  std::string_view arg;
  /// The value the framework runs under the exported arguments: no argument changes it, or only
  /// one the export does not write (a config file; `why` says which).
  std::optional<int> fixed;
  /// `fixed` is also the knob's neutral value and the framework's own default (tp_channels 0:
  /// NCCL's choice): a plan holding it needs no note, no annotation and no argument.
  bool quiet_at_fixed = false;
  std::string_view why;      ///< what the argument does / why the value is fixed or cannot be expressed
  std::string_view source;   ///< where the framework defines or fixes it (file, function)
};

/// @brief How one framework treats plans of one strategy.
struct FrameworkSupport {
  Framework framework = Framework::megatron;
  bool runs = false;  ///< the framework has this strategy's schedule
  /// Arguments, as written, that select the strategy together ("--tp-comm-overlap",
  /// "--disable-tp-comm-bulk-dgrad", ...); empty: nothing to select (the framework's default or
  /// only schedule). The importer takes a strategy when the declared selecting arguments present
  /// are exactly its set, so strategies may share arguments (te-pipelined and te-bulk share
  /// --tp-comm-overlap and differ in what they switch off).
  std::vector<std::string_view> selected_by;
  /// What each of `selected_by` does (same order), the export's comment; missing: the
  /// strategy's description.
  std::vector<std::string_view> selected_why;
  std::vector<KnobSupport> knobs;  ///< when it runs: one per knob of the strategy
  std::string_view instead;        ///< when it does not: what the framework runs given such a plan
  /// Where that is decided (file, function): what runs instead, or where the selecting arguments
  /// are defined and read.
  std::string_view source;
};

/// @brief Every framework's support of one strategy (by sim::Strategy::name).
struct StrategySupport {
  std::string_view strategy;
  std::vector<FrameworkSupport> frameworks;
};

/// @brief Declares a strategy's support (a plug-in's, or a test's). `s` must outlive every use (a
/// static); a second declaration for the same strategy throws std::invalid_argument. The built-in
/// strategies' declarations (none, domino, te-pipelined, te-bulk, async-tp) are in
/// bridge/strategy_support.cpp.
void register_support(const StrategySupport& s);
/// @brief The declaration of how `f` runs `s`, or null if none was declared.
const FrameworkSupport* find_support(const sim::Strategy& s, Framework f);

/// @brief What becomes of a plan's strategy and its knobs in one framework: export writes `args`,
/// `notes` and `gaps` as comments and `annotation` in its `# slicetune:` line; check reports `gaps`.
struct StrategyInFramework {
  struct Arg {
    std::string text, comment;
  };
  struct Gap {
    std::string rule;     ///< check's rule id: "strategy-domino", "domino-row-slices"
    std::string message;  ///< "row_slices 4: DeepSpeed-Domino runs 2 (...)"
    std::string source;
    bool declared = true;  ///< false: nothing was declared, so slicetune cannot say what the framework runs
  };
  std::vector<Arg> args;           ///< the framework's arguments that carry the strategy and its knobs
  std::vector<std::string> notes;  ///< knobs at the value the framework always runs
  std::vector<Gap> gaps;           ///< what the framework cannot run as the plan says
  std::vector<std::pair<std::string, std::string>> annotation;  ///< key=value not carried by an argument
};
StrategyInFramework express_strategy(Framework f, const sim::Plan& p);

/// @brief A Megatron-style argument (Megatron-LM or DeepSpeed-Domino) that some strategy declared
/// as carrying one of its knobs.
struct ArgumentTarget {
  const sim::Strategy* strategy = nullptr;
  const sim::Knob* knob = nullptr;
};
/// @brief The declared knob argument `name` (it takes a value), if a registered strategy declared one.
std::optional<ArgumentTarget> find_argument(std::string_view name);
/// @brief Whether `name` is one of the arguments that select a strategy a declaration says
/// Megatron-LM or DeepSpeed-Domino runs (a switch: it takes no value).
bool is_selecting_argument(std::string_view name);
/// @brief The strategy that the selecting arguments `present` (as is_selecting_argument) select:
/// the one whose Megatron-LM or DeepSpeed-Domino `selected_by` is exactly that set. Null, with
/// `why` saying which sets would select what, when none is (e.g. --tp-comm-overlap alone runs
/// TransformerEngine's bulk and pipelined methods together, which no strategy models).
struct Selection {
  const sim::Strategy* strategy = nullptr;
  std::string why;
};
Selection select_strategy(const std::vector<std::string>& present);

/// @brief The strategy `f` runs when its arguments select none (declared `runs` with no
/// `selected_by`; sim::default_strategy() first when it qualifies): none for Megatron-LM and NeMo,
/// domino for DeepSpeed-Domino (its only schedule). Null if no declaration says.
const sim::Strategy* own_schedule(Framework f);
/// @brief Reads `plan`, imported from `f`'s arguments, as `f` runs it: when no argument or
/// `# slicetune:` line named a strategy, sets own_schedule(f) and the knobs `f` fixes. Returns
/// what was set ("strategy domino, row_slices 2, ..."), empty if nothing.
std::string apply_own_schedule(Framework f, sim::PlanInput& plan);

/// @brief The check rules the declarations imply (one per strategy a framework does not run, one
/// per fixed knob), as id, frameworks, what, source.
struct DeclaredRule {
  std::string id;
  std::vector<Framework> frameworks;
  std::string what, source;
};
std::vector<DeclaredRule> declared_rules();

}  // namespace bridge
