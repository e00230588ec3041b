#include "common/yaml_node.hpp"

#include <fmt/format.h>
#include <yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <sstream>

#include "common/config_error.hpp"
#include "common/limits.hpp"

namespace common {

struct YamlNode::Data {
  Type type = Type::null;
  YamlMark mark;
  std::string text;              // a scalar's
  std::vector<YamlNode> items;   // a sequence's
  std::vector<Entry> entries;    // a mapping's
};

namespace {
const std::string kNoText;
const std::vector<YamlNode> kNoItems;
const std::vector<YamlNode::Entry> kNoEntries;
}  // namespace

YamlNode YamlNode::null_node(YamlMark at) {
  YamlNode n;
  n.d_ = std::make_shared<Data>();
  n.d_->mark = at;
  return n;
}

YamlNode YamlNode::scalar_node(std::string text, YamlMark at) {
  YamlNode n = null_node(at);
  n.d_->type = Type::scalar;
  n.d_->text = std::move(text);
  return n;
}

YamlNode YamlNode::sequence_node(YamlMark at) {
  YamlNode n = null_node(at);
  n.d_->type = Type::sequence;
  return n;
}

YamlNode YamlNode::map_node(YamlMark at) {
  YamlNode n = null_node(at);
  n.d_->type = Type::map;
  return n;
}

bool YamlNode::is_null() const { return d_ && d_->type == Type::null; }
bool YamlNode::is_scalar() const { return d_ && d_->type == Type::scalar; }
bool YamlNode::is_sequence() const { return d_ && d_->type == Type::sequence; }
bool YamlNode::is_map() const { return d_ && d_->type == Type::map; }
const std::string& YamlNode::scalar() const { return is_scalar() ? d_->text : kNoText; }
YamlMark YamlNode::mark() const { return d_ ? d_->mark : YamlMark{}; }

std::size_t YamlNode::size() const {
  if (is_sequence()) return d_->items.size();
  if (is_map()) return d_->entries.size();
  return 0;
}

YamlNode YamlNode::operator[](std::string_view key) const {
  if (!is_map()) return {};
  for (const Entry& e : d_->entries)
    if (e.key.is_scalar() && e.key.d_->text == key) return e.value;
  return {};
}

YamlNode YamlNode::operator[](std::size_t i) const { return is_sequence() && i < d_->items.size() ? d_->items[i] : YamlNode{}; }
const std::vector<YamlNode::Entry>& YamlNode::entries() const { return is_map() ? d_->entries : kNoEntries; }
const std::vector<YamlNode>& YamlNode::items() const { return is_sequence() ? d_->items : kNoItems; }

void YamlNode::set(std::string_view key, YamlNode value) {
  if (!is_map()) throw std::logic_error("YamlNode::set: not a mapping");
  for (Entry& e : d_->entries)
    if (e.key.is_scalar() && e.key.d_->text == key) {
      e.value = std::move(value);
      return;
    }
  d_->entries.push_back({scalar_node(std::string(key)), std::move(value)});
}

void YamlNode::set(std::string_view key, std::string text) { set(key, scalar_node(std::move(text))); }

YamlNode YamlNode::child_map(std::string_view key) {
  YamlNode v = (*this)[key];
  if (v.is_map()) return v;
  v = map_node();
  set(key, v);
  return v;
}

void YamlNode::append(YamlNode key, YamlNode value) {
  if (!is_map()) throw std::logic_error("YamlNode::append: not a mapping");
  d_->entries.push_back({std::move(key), std::move(value)});
}

void YamlNode::push_back(YamlNode item) {
  if (!is_sequence()) throw std::logic_error("YamlNode::push_back: not a sequence");
  d_->items.push_back(std::move(item));
}

YamlNode YamlNode::deep_copy() const {
  if (!d_) return {};
  YamlNode n = null_node(d_->mark);
  n.d_->type = d_->type;
  n.d_->text = d_->text;
  for (const YamlNode& i : d_->items) n.d_->items.push_back(i.deep_copy());
  for (const Entry& e : d_->entries) n.d_->entries.push_back({e.key.deep_copy(), e.value.deep_copy()});
  return n;
}

// ---- parsing ------------------------------------------------------------------------------------

namespace {

YamlMark mark_of(const yaml_mark_t& m) { return {static_cast<int>(m.line), static_cast<int>(m.column)}; }

/// libyaml's parser and its current event, released however parsing ends
struct Parser {
  yaml_parser_t p{};
  yaml_event_t e{};
  bool has_event = false;
  explicit Parser(const std::string& text) {
    if (!yaml_parser_initialize(&p)) throw std::bad_alloc();
    yaml_parser_set_input_string(&p, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  }
  ~Parser() {
    if (has_event) yaml_event_delete(&e);
    yaml_parser_delete(&p);
  }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  const yaml_event_t& next() {
    if (has_event) yaml_event_delete(&e);
    has_event = false;
    if (!yaml_parser_parse(&p, &e)) {
      if (p.error == YAML_MEMORY_ERROR) throw std::bad_alloc();
      std::string what = p.problem ? p.problem : "malformed";
      if (p.context) what = fmt::format("{} {}", p.context, what);
      throw YamlSyntaxError(mark_of(p.problem_mark), what);
    }
    has_event = true;
    return e;
  }
};

bool null_text(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

}  // namespace

YamlNode parse_yaml_document(const std::string& text) {
  Parser parser(text);
  // An alias names the most recent node before it with that anchor. A collection's anchor is
  // defined at its start, but an alias to it is refused until its end: an alias inside the node it
  // names (`&a [*a]`) would make the tree contain itself - a structure no config means, that a
  // reader walking it would never finish and that shared ownership would never free (YAML allows
  // it; yaml-cpp built it, and the readers ran into the node limit).
  struct Anchor {
    YamlNode node;
    std::uint64_t id = 0;  // which definition (the latest one counts)
    bool complete = false;
  };
  std::map<std::string, Anchor, std::less<>> anchors;
  std::uint64_t definitions = 0;
  struct Open {
    YamlNode node;
    YamlNode key;  // a mapping's key waiting for its value
    bool has_key = false;
    std::string anchor;  // its anchor ("" none) and that definition's id
    std::uint64_t anchor_id = 0;
  };
  std::vector<Open> open;
  YamlNode root;
  bool done = false;
  // a finished node goes into the collection it belongs to (or is the document)
  auto place = [&](YamlNode n) {
    if (open.empty()) {
      root = std::move(n);
      return;
    }
    Open& o = open.back();
    if (o.node.is_sequence()) {
      o.node.push_back(std::move(n));
    } else if (!o.has_key) {
      o.key = std::move(n);
      o.has_key = true;
    } else {
      o.node.append(std::move(o.key), std::move(n));
      o.key = {};
      o.has_key = false;
    }
  };
  auto anchor = [&](const yaml_char_t* name, const YamlNode& n, bool complete) -> std::uint64_t {
    if (!name) return 0;
    anchors[reinterpret_cast<const char*>(name)] = {.node = n, .id = ++definitions, .complete = complete};
    return definitions;
  };
  bool in_document = false;
  while (!done) {
    const yaml_event_t& e = parser.next();
    switch (e.type) {
      case YAML_STREAM_END_EVENT:
        done = true;
        break;
      case YAML_DOCUMENT_START_EVENT:
        if (in_document) done = true;  // the first document only
        in_document = true;
        break;
      case YAML_DOCUMENT_END_EVENT:
        done = true;
        break;
      case YAML_SCALAR_EVENT: {
        const auto& s = e.data.scalar;
        std::string value(reinterpret_cast<const char*>(s.value), s.length);
        const YamlMark at = mark_of(e.start_mark);
        YamlNode n = s.style == YAML_PLAIN_SCALAR_STYLE && !s.tag && null_text(value) ? YamlNode::null_node(at)
                                                                                       : YamlNode::scalar_node(std::move(value), at);
        anchor(s.anchor, n, true);
        place(std::move(n));
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (static_cast<std::int64_t>(open.size()) >= limits::kMaxYamlDepth)
          throw YamlSyntaxError(mark_of(e.start_mark), fmt::format("nested deeper than {} lists and mappings", limits::kMaxYamlDepth));
        const bool seq = e.type == YAML_SEQUENCE_START_EVENT;
        YamlNode n = seq ? YamlNode::sequence_node(mark_of(e.start_mark)) : YamlNode::map_node(mark_of(e.start_mark));
        const yaml_char_t* name = seq ? e.data.sequence_start.anchor : e.data.mapping_start.anchor;
        const std::uint64_t id = anchor(name, n, false);
        open.push_back({.node = std::move(n), .anchor = name ? reinterpret_cast<const char*>(name) : "", .anchor_id = id});
        break;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        Open o = std::move(open.back());
        open.pop_back();
        if (o.anchor_id) {  // complete now, unless a later node took the anchor
          Anchor& a = anchors[o.anchor];
          if (a.id == o.anchor_id) a.complete = true;
        }
        place(std::move(o.node));
        break;
      }
      case YAML_ALIAS_EVENT: {
        const char* name = reinterpret_cast<const char*>(e.data.alias.anchor);
        const auto it = anchors.find(name);
        if (it == anchors.end()) throw YamlSyntaxError(mark_of(e.start_mark), fmt::format("alias *{} names no anchor before it", name));
        if (!it->second.complete)
          throw YamlSyntaxError(mark_of(e.start_mark), fmt::format("alias *{} is inside the node it names (a structure that contains itself)", name));
        place(it->second.node);
        break;
      }
      case YAML_STREAM_START_EVENT:
      case YAML_NO_EVENT:
        break;
    }
  }
  return root ? root : YamlNode::null_node();
}

// ---- scalars as values (YAML 1.1's types as yaml-cpp reads them) -------------------------------

namespace {

/// The stream read every reader used before (yaml-cpp's): no base set (0x hex, 0 octal), no
/// leading space, the whole text consumed but for trailing spaces.
template <class T>
std::optional<T> stream_read(const std::string& s) {
  std::istringstream in(s);
  in.unsetf(std::ios::dec);
  T v{};
  if ((in >> std::noskipws >> v) && (in >> std::ws).eof()) return v;
  return std::nullopt;
}

}  // namespace

std::optional<double> yaml_to_double(const std::string& s) {
  // the common case without a stream: plain decimal text that from_chars reads whole (the same
  // correctly rounded value); anything else (a sign '+', spaces, overflow, letters) as the stream reads it
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '.') &&
      std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'; })) {
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) return v;
  }
  if (auto v = stream_read<double>(s)) return v;
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" || s == "+.INF") return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

std::optional<long long> yaml_to_integer(const std::string& s) {
  // decimal without a leading zero (a leading 0 is octal to the stream): from_chars, the same value
  const std::size_t digits = !s.empty() && s[0] == '-' ? 1 : 0;
  if (s.size() > digits && (s[digits] != '0' || s.size() == digits + 1) &&
      std::all_of(s.begin() + static_cast<std::ptrdiff_t>(digits), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) return v;
    return std::nullopt;  // past 64 bits (the stream fails there too)
  }
  return stream_read<long long>(s);
}

std::optional<bool> yaml_to_bool(const std::string& s) {
  if (s.empty()) return std::nullopt;
  // all lower case, all upper case, or a capital and then lower case
  const bool lower = std::none_of(s.begin(), s.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); });
  const bool upper = std::none_of(s.begin(), s.end(), [](char c) { return std::islower(static_cast<unsigned char>(c)); });
  const bool capital = std::isupper(static_cast<unsigned char>(s[0])) &&
                       std::none_of(s.begin() + 1, s.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); });
  if (!lower && !upper && !capital) return std::nullopt;
  std::string t = s;
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "y" || t == "yes" || t == "true" || t == "on") return true;
  if (t == "n" || t == "no" || t == "false" || t == "off") return false;
  return std::nullopt;
}

// ---- writing ------------------------------------------------------------------------------------

std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out + "\"";
}

std::string yaml_scalar_text(const std::string& s) {
  const bool plain = !null_text(s) && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '+' || c == '/';
  });
  return plain ? s : yaml_quoted(s);
}

std::string emit_yaml_mapping(const YamlNode& map, const std::string& source, int indent, const std::string& path) {
  if (!map) return "";  // absent: nothing to write
  if (!map.is_map()) throw ConfigError(source, path, "expected a mapping");
  std::string out;
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (const auto& [k, v] : map.entries()) {
    if (!k.is_scalar()) throw ConfigError(source, path, "a key is not a plain name");
    const std::string& key = k.scalar();
    const std::string at = path.empty() ? key : path + "." + key;
    if (v.is_map()) {
      out += pad + yaml_scalar_text(key) + ":\n";
      out += emit_yaml_mapping(v, source, indent + 2, at);
    } else if (v.is_scalar()) {
      out += pad + yaml_scalar_text(key) + ": " + yaml_scalar_text(v.scalar()) + "\n";
    } else if (v.is_sequence()) {
      // a flow list of scalars, plain where safe (yaml_scalar_text leaves no comma or bracket plain, so an item
      // never splits), else double-quoted: `fused: [residual]`, as configs/ writes it
      std::string items;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_scalar()) throw ConfigError(source, fmt::format("{}[{}]", at, i), "expected a value");
        items += (i ? ", " : "") + yaml_scalar_text(v[i].scalar());
      }
      out += pad + yaml_scalar_text(key) + ": [" + items + "]\n";
    } else {
      throw ConfigError(source, at, "expected a value or a mapping");
    }
  }
  return out;
}

}  // namespace common
