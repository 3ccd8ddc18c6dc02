// JSON text to a DOM, with the guards that a hostile file needs (graph files, safetensors
// headers): no NUL byte anywhere (nlohmann's lexer takes one for the end of the input, so junk
// after it would pass), nesting at most kMaxJsonDepth deep (scanned before parsing, so that
// nothing, not even the destruction of a partial value, recurses on the input's depth), no
// duplicate object keys, and linear time for objects of any size (ordered_map looks up every new
// key in a list, which is quadratic for one large object: here members are appended directly and
// duplicates found by sorting once the object is complete).
#include <algorithm>
#include <string_view>
#include <vector>

#include "engine/base/check.hpp"
#include "engine/base/memory_budget.hpp"
#include "engine/ir/json_io.hpp"

namespace kiln {

using ojson = nlohmann::ordered_json;

namespace {

// Where the text first breaks a rule that the parser does not see: a NUL byte, or an opening
// bracket past the depth limit. npos when neither.
struct ScanFinding {
  size_t at = std::string::npos;
  bool nul = false;
};

ScanFinding scan_text(const std::string& text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\0') return {i, true};
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return {i, false};
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return {};
}

// A SAX consumer that builds an ordered_json DOM without per-key lookups.
class DomBuilder {
 public:
  using number_integer_t = ojson::number_integer_t;
  using number_unsigned_t = ojson::number_unsigned_t;
  using number_float_t = ojson::number_float_t;
  using string_t = ojson::string_t;
  using binary_t = ojson::binary_t;
  using Members = ojson::object_t::Container;

  explicit DomBuilder(const std::string& source) : source_(source) {}

  bool null() { return put(ojson(nullptr)) != nullptr; }
  bool boolean(bool v) { return put(ojson(v)) != nullptr; }
  bool number_integer(number_integer_t v) { return put(ojson(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return put(ojson(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t&) { return put(ojson(v)) != nullptr; }
  bool string(string_t& v) { return put(ojson(std::move(v))) != nullptr; }
  bool binary(binary_t& v) { return put(ojson::binary(std::move(v))) != nullptr; }

  bool start_object(std::size_t) { return open(ojson::object()); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool key(string_t& k) {
    Members& m = stack_.back()->get_ref<ojson::object_t&>();
    m.emplace_back(std::move(k), nullptr);
    slot_ = &m.back().second;
    return true;
  }
  bool end_object() {
    check_unique_keys(*stack_.back());
    stack_.pop_back();
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_byte_ = position;
    error_ = e.what();
    return false;
  }

  ojson& root() { return root_; }
  const std::string& error() const { return error_; }
  size_t error_byte() const { return error_byte_; }

 private:
  // Places a value where the parser is (the root, the next array element, or the value of the
  // last key) and returns it.
  ojson* put(ojson v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    ojson& top = *stack_.back();
    if (top.is_array()) {
      top.get_ref<ojson::array_t&>().push_back(std::move(v));
      return &top.get_ref<ojson::array_t&>().back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool open(ojson v) {
    // The scan has bounded the depth already; this keeps the builder safe on its own.
    KILN_CHECK(stack_.size() < static_cast<size_t>(kMaxJsonDepth),
               "{}: invalid JSON: nesting deeper than {} levels", source_, kMaxJsonDepth);
    stack_.push_back(put(std::move(v)));
    return true;
  }
  void check_unique_keys(const ojson& obj) const {
    const Members& m = obj.get_ref<const ojson::object_t&>();
    if (m.size() < 2) return;
    std::vector<std::string_view> keys;
    keys.reserve(m.size());
    for (const auto& kv : m) keys.emplace_back(kv.first);
    std::sort(keys.begin(), keys.end());
    auto dup = std::adjacent_find(keys.begin(), keys.end());
    KILN_CHECK(dup == keys.end(), "{}: duplicate key '{}' in an object (at nesting depth {})",
               source_, dup == keys.end() ? std::string_view() : *dup, stack_.size());
  }

  const std::string& source_;
  ojson root_;
  std::vector<ojson*> stack_;  // the open objects and arrays, innermost last
  ojson* slot_ = nullptr;      // the value of the last key of the innermost object
  std::string error_;
  size_t error_byte_ = 0;
};

}  // namespace

std::string line_col(const std::string& text, size_t byte) {
  byte = std::min(byte, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("{}:{}", line, col);
}

ojson parse_json(const std::string& text, const std::string& source) {
  ScanFinding f = scan_text(text);
  if (f.at != std::string::npos && f.nul)
    KILN_FAIL("{}:{}: invalid JSON: a NUL byte (JSON text has none; junk after the value?)", source,
              line_col(text, f.at));
  if (f.at != std::string::npos)
    KILN_FAIL("{}:{}: invalid JSON: nesting deeper than {} levels", source, line_col(text, f.at),
              kMaxJsonDepth);
  // The DOM costs at most ~16 bytes per byte of text (a one-digit number in a list: 2 bytes of
  // text, a 16-byte value): bounded by the host memory budget before it is built.
  check_host_bytes(fmt::format("{}: the parsed JSON of {} bytes of text", source, text.size()),
                   static_cast<uint64_t>(text.size()) * 16);
  DomBuilder b(source);
  if (!ojson::sax_parse(text, &b, ojson::input_format_t::json, /*strict=*/true)) {
    // The message is "[json.exception.parse_error.101] parse error at line 1, column 2: what".
    const std::string& what = b.error();
    size_t colon = what.find(": ", what.find("parse error"));
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    size_t byte = b.error_byte() > 0 ? b.error_byte() - 1 : 0;
    KILN_FAIL("{}:{}: invalid JSON: {}", source, line_col(text, byte), detail);
  }
  return std::move(b.root());
}

}  // namespace kiln
