// The subcommand table, argument parsing and the helpers shared by the subcommands.
#include "tools/cli_common.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "kiln/io.hpp"
#include "kiln/memory_budget.hpp"
#include "kiln/random.hpp"

namespace kiln::cli {

namespace {
std::vector<Command>& table() {
  static std::vector<Command> t;
  return t;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

uint64_t fnv1a_bytes(const std::byte* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint64_t>(p[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}
}  // namespace

bool register_command(const Command& c) {
  auto& t = table();
  KILN_ASSERT(std::none_of(t.begin(), t.end(),
                           [&](const Command& o) { return std::string(o.name) == c.name; }),
              "subcommand '{}' registered twice", c.name);
  t.push_back(c);
  return true;
}

std::vector<Command> commands() {
  std::vector<Command> t = table();
  std::sort(t.begin(), t.end(),
            [](const Command& a, const Command& b) { return std::string(a.name) < b.name; });
  return t;
}

const Command* find_command(const std::string& name) {
  for (const Command& c : table())
    if (name == c.name) return &c;
  return nullptr;
}

void usage_error(const std::string& cmd, const std::string& message) {
  KILN_FAIL("{}: {} (see 'kiln {} --help')", cmd, message, cmd);
}

std::string Args::get(const std::string& flag, const std::string& def) const {
  auto it = values.find(flag);
  return it == values.end() || it->second.empty() ? def : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& flag) const {
  static const std::vector<std::string> none;
  auto it = values.find(flag);
  return it == values.end() ? none : it->second;
}

Args parse_args(const std::string& cmd, const std::vector<std::string>& args,
                const std::vector<FlagSpec>& flags, size_t min_pos, size_t max_pos) {
  Args out;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done || a.size() < 2 || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    std::string name = a, value;
    bool inline_value = false;
    if (size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    auto spec =
        std::find_if(flags.begin(), flags.end(), [&](const FlagSpec& f) { return f.name == name; });
    if (spec == flags.end()) {
      std::vector<std::string> names;
      for (const FlagSpec& f : flags) names.push_back(f.name);
      usage_error(cmd, fmt::format("unknown flag '{}' (expected one of: {})", name,
                                   names.empty() ? std::string("none") : join(names)));
    }
    if (spec->takes_value) {
      if (!inline_value) {
        if (i + 1 >= args.size()) usage_error(cmd, fmt::format("{} needs a value", name));
        value = args[++i];
      }
    } else if (inline_value) {
      usage_error(cmd, fmt::format("{} takes no value, found '{}'", name, value));
    }
    auto& vs = out.values[name];
    if (!spec->repeatable && !vs.empty())
      usage_error(cmd, fmt::format("{} given more than once", name));
    vs.push_back(value);
  }
  if (out.positional.size() < min_pos || out.positional.size() > max_pos) {
    std::string want =
        min_pos == max_pos ? std::to_string(min_pos) : fmt::format("{} to {}", min_pos, max_pos);
    usage_error(
        cmd, fmt::format("expected {} argument{}, found {}{}", want, max_pos == 1 ? "" : "s",
                         out.positional.size(),
                         out.positional.empty() ? std::string()
                                                : fmt::format(" ({})", join(out.positional, " "))));
  }
  return out;
}

int64_t parse_int(const std::string& cmd, const std::string& flag, const std::string& value,
                  int64_t min) {
  int64_t v = 0;
  const char* b = value.data();
  const char* e = b + value.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (value.empty() || ec != std::errc() || p != e)
    usage_error(cmd, fmt::format("{}: expected an integer, found '{}'", flag, value));
  if (v < min) usage_error(cmd, fmt::format("{}: expected at least {}, found {}", flag, min, v));
  return v;
}

Bindings parse_shape_flags(const std::string& cmd, const std::vector<std::string>& values,
                           const Graph& g) {
  std::vector<std::string> syms = g.symbols();
  Bindings b;
  for (const std::string& v : values) {
    size_t start = 0;
    for (;;) {
      size_t comma = v.find(',', start);
      std::string item =
          v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0)
        usage_error(cmd, fmt::format("--shape: expected SYM=V (such as N=8), found '{}'", item));
      std::string sym = item.substr(0, eq);
      if (std::find(syms.begin(), syms.end(), sym) == syms.end())
        usage_error(cmd, fmt::format("--shape {}: the graph has no symbol '{}' (its symbols: {})",
                                     item, sym, syms.empty() ? std::string("none") : join(syms)));
      int64_t n = parse_int(cmd, "--shape " + sym, item.substr(eq + 1), 1);
      auto [it, fresh] = b.emplace(sym, n);
      if (!fresh && it->second != n)
        usage_error(
            cmd, fmt::format("--shape: symbol '{}' given twice, as {} and {}", sym, it->second, n));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return b;
}

namespace {
// Checks a tensor read from a file against the graph input it is meant for.
void check_input_tensor(const Graph& g, const TensorInfo& t, const HostTensor& h,
                        const std::string& origin) {
  KILN_CHECK(h.dtype == t.desc.dtype, "{}: input '{}' is declared {}, the file holds {}", origin,
             t.name, dtype_name(t.desc.dtype), dtype_name(h.dtype));
  KILN_CHECK(h.rank() == t.desc.rank(), "{}: input '{}' is declared {} (rank {}), found shape {}",
             origin, t.name, shape_str(t.desc.shape), t.desc.rank(), dims_str(h.shape));
}

// Random inputs are generated through an f64 buffer: 2^32 elements is 32 GiB of it.
constexpr int64_t kMaxRandomElements = int64_t{1} << 32;

uint64_t seed_for(uint64_t seed, const std::string& name) {
  return fnv1a_bytes(reinterpret_cast<const std::byte*>(name.data()), name.size(),
                     0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull));
}
}  // namespace

void parse_int_range(const std::string& cmd, const std::string& value, InputOptions* o) {
  size_t colon = value.find(':', 1);
  if (colon == std::string::npos)
    usage_error(cmd, fmt::format("--int-range: expected LO:HI (integers), found '{}'", value));
  constexpr int64_t kMax = int64_t{1} << 53;
  int64_t lo = parse_int(cmd, "--int-range", value.substr(0, colon), -kMax);
  int64_t hi = parse_int(cmd, "--int-range", value.substr(colon + 1), -kMax);
  if (lo >= hi || lo < -kMax || hi > kMax)
    usage_error(cmd, fmt::format("--int-range: expected LO < HI within +-2^53, found '{}'", value));
  o->int_lo = lo;
  o->int_hi = hi;
}

PreparedInputs prepare_inputs(const std::string& cmd, const Graph& g, const InputOptions& o) {
  PreparedInputs p;
  auto input_info = [&](const std::string& name, const std::string& where) -> const TensorInfo& {
    int id = g.find(name);
    if (id < 0 || g.tensor(id).role != TensorRole::Input) {
      std::vector<std::string> names;
      for (int i : g.inputs()) names.push_back(g.tensor(i).name);
      KILN_FAIL("{}: '{}' is not an input of graph '{}' (its inputs: {})", where, name, g.name(),
                names.empty() ? std::string("none") : join(names));
    }
    return g.tensor(id);
  };

  if (!o.inputs_file.empty()) {
    std::map<std::string, HostTensor> all = read_safetensors(o.inputs_file);
    for (auto& [key, h] : all) {
      std::string where = fmt::format("--inputs {}[{}]", o.inputs_file, key);
      const TensorInfo& t = input_info(key, where);
      check_input_tensor(g, t, h, where);
      p.origin[key] = fmt::format("{}[{}]", o.inputs_file, key);
      p.tensors[key] = std::move(h);
    }
  }
  std::set<std::string> by_flag;  // --input overrides --inputs, but only once per name
  for (const std::string& flag : o.input_flags) {
    size_t eq = flag.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size())
      usage_error(cmd, fmt::format("--input: expected NAME=FILE.safetensors, found '{}'", flag));
    std::string name = flag.substr(0, eq), file = flag.substr(eq + 1);
    const TensorInfo& t = input_info(name, "--input " + flag);
    KILN_CHECK(by_flag.insert(name).second, "--input {}: input '{}' is given twice", flag, name);
    std::map<std::string, HostTensor> all = read_safetensors(file);
    auto it = all.find(name);
    if (it == all.end()) {
      std::vector<std::string> keys;
      for (const auto& kv : all) keys.push_back(kv.first);
      KILN_CHECK(all.size() == 1,
                 "--input {}: {} has no tensor '{}' and more than one tensor to choose from "
                 "(its keys: {})",
                 flag, file, name, join(keys));
      it = all.begin();
    }
    std::string where = fmt::format("--input {}[{}]", file, it->first);
    check_input_tensor(g, t, it->second, where);
    p.origin[name] = fmt::format("{}[{}]", file, it->first);
    p.tensors[name] = std::move(it->second);
  }

  // Symbols: those of the random inputs must come from --shape or from the given inputs.
  std::map<std::string, std::vector<int64_t>> given_shapes;
  for (const auto& [name, h] : p.tensors) given_shapes[name] = h.shape;
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    if (p.tensors.count(t.name)) continue;
    for (const Dim& d : t.desc.shape) {
      std::vector<std::string> syms;
      d.symbols(&syms);
      for (const std::string& s : syms) {
        if (o.shapes.count(s)) continue;
        bool from_input = false;
        for (const auto& [name, shape] : given_shapes) {
          const TensorInfo& gi = g.tensor(g.find(name));
          for (const Dim& gd : gi.desc.shape)
            if (gd.is_symbol() && gd.symbol() == s) from_input = true;
        }
        KILN_CHECK(from_input,
                   "input '{}' ({}) is not given, so it is filled with random values, and that "
                   "needs symbol '{}': pass --shape {}=V, or give '{}' with --input/--inputs",
                   t.name, t.desc.str(), s, s, t.name);
      }
    }
  }
  p.bindings = g.bind(given_shapes, o.shapes);

  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    if (p.tensors.count(t.name)) continue;
    std::vector<int64_t> shape = eval_shape(t.desc.shape, p.bindings);
    int64_t n = 1;
    for (int64_t d : shape)
      KILN_CHECK(!__builtin_mul_overflow(n, d, &n) && n <= kMaxRandomElements,
                 "input '{}' ({}) would be {} with these bindings: more than the {} elements a "
                 "random input may have",
                 t.name, t.desc.str(), dims_str(shape), kMaxRandomElements);
    // The f64 values and the tensor made from them, both alive at once.
    check_host_bytes(
        fmt::format("random input '{}' ({} = {})", t.name, t.desc.str(), dims_str(shape)),
        static_cast<uint64_t>(n) * (sizeof(double) + dtype_size(t.desc.dtype)));
    const DType dt = t.desc.dtype;
    Layout layout = t.desc.layout == Layout::Strided ? Layout::NCHW : t.desc.layout;
    if (is_float(dt)) {
      std::vector<double> v = random_values(true, 0.0, 1.0, seed_for(o.seed, t.name), n);
      p.tensors[t.name] = HostTensor::from_f64(dt, shape, v, layout);
      p.origin[t.name] = fmt::format("random normal(0, 1), seed {}", o.seed);
    } else {
      // Uniform integers: the floor of a uniform draw over [lo, hi) (exact: |lo|, |hi| <= 2^53).
      const bool b = dt == DType::Bool;
      const double lo = b ? 0.0 : static_cast<double>(o.int_lo);
      const double hi = b ? 2.0 : static_cast<double>(o.int_hi);
      std::vector<double> v = random_values(false, lo, hi, seed_for(o.seed, t.name), n);
      std::vector<int64_t> iv(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        iv[i] = std::min(static_cast<int64_t>(std::floor(v[i])), static_cast<int64_t>(hi) - 1);
      p.tensors[t.name] = HostTensor::from_i64(dt, shape, iv, layout);
      p.origin[t.name] =
          b ? fmt::format("random 0/1, seed {}", o.seed)
            : fmt::format("random integers in [{}, {}), seed {}", o.int_lo, o.int_hi, o.seed);
    }
  }
  // Safetensors files hold logical row-major data; every input leaves here in its declared
  // layout, because the GPU session copies the bytes as they are (an NHWC input read from a file
  // was uploaded row-major: a silently scrambled image).
  for (auto& [name, h] : p.tensors) {
    const TensorInfo& t = g.tensor(g.find(name));
    Layout layout = t.desc.layout == Layout::Strided ? Layout::NCHW : t.desc.layout;
    if (h.strides != layout_strides(h.shape, layout, {})) h = h.relayout(layout);
  }
  return p;
}

uint64_t fnv1a64(const HostTensor& t) {
  if (t.is_row_major()) return fnv1a_bytes(t.data.data(), t.data.size());
  HostTensor r = t.relayout(Layout::NCHW);
  return fnv1a_bytes(r.data.data(), r.data.size());
}

TensorStats tensor_stats(const HostTensor& t) {
  TensorStats s;
  std::vector<double> v = t.to_f64();
  double sum = 0;
  int64_t finite = 0;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -std::numeric_limits<double>::infinity();
  for (double x : v) {
    if (std::isnan(x)) {
      ++s.nan;
      continue;
    }
    if (std::isinf(x)) ++s.inf;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    if (std::isfinite(x)) {
      sum += x;
      ++finite;
    }
  }
  if (s.nan == static_cast<int64_t>(v.size())) s.min = s.max = std::nan("");
  s.mean = finite ? sum / static_cast<double>(finite) : std::nan("");
  return s;
}

std::string dims_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace kiln::cli
