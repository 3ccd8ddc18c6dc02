// Graph files (version 1): loading through the builder (so every check of the op table runs with
// the file's location), and saving in the same form.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "engine/base/check.hpp"
#include "engine/base/file_io.hpp"
#include "engine/base/memory_budget.hpp"
#include "engine/ir/json_io.hpp"
#include "engine/ir/op_table.hpp"
#include "kiln/io.hpp"

namespace kiln {

using ojson = nlohmann::ordered_json;

LoadLimits& load_limits() {
  static LoadLimits l;
  return l;
}

namespace {

// ------------------------------------------------------------------------------- loading

std::string type_of(const ojson& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

// A short rendering of a JSON value for "found ..." in messages.
std::string brief(const ojson& j) {
  std::string s = j.dump();
  if (s.size() > 60) {
    size_t cut = 57;  // not inside a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "...";
  }
  return s;
}

std::string keys_of(std::initializer_list<const char*> keys) {
  std::string s;
  for (const char* k : keys) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

void check_keys(const ojson& obj, std::initializer_list<const char*> valid,
                const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char* k : valid) ok |= it.key() == k;
    KILN_CHECK(ok, "{}: unknown key '{}' (valid: {})", where, it.key(), keys_of(valid));
  }
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// An integer that fits int64 (JSON unsigned values above it are refused).
int64_t get_int(const ojson& j, const std::string& where, const char* what) {
  KILN_CHECK(j.is_number_integer(), "{}: expected {}, found {} {}", where, what, type_of(j),
             brief(j));
  if (j.is_number_unsigned())
    KILN_CHECK(j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
               "{}: expected {}, found {} (too large)", where, what, brief(j));
  return j.get<int64_t>();
}

// One element of an integer or bool constant's data: an integer in the dtype's range (bool:
// true, false, 0 or 1).
int64_t get_int_value(const ojson& j, const std::string& where, DType t) {
  if (t == DType::Bool && j.is_boolean()) return j.get<bool>() ? 1 : 0;
  KILN_CHECK(j.is_number_integer(), "{}: expected an integer ({} data), found {} {}", where,
             dtype_name(t), type_of(j), brief(j));
  KILN_CHECK(!j.is_number_unsigned() || j.get<uint64_t>() <= uint64_t{INT64_MAX},
             "{}: {} is out of range for {}", where, j.get<uint64_t>(), dtype_name(t));
  int64_t v = j.get<int64_t>();
  int64_t lo = t == DType::I64 ? INT64_MIN : t == DType::I32 ? INT32_MIN : 0;
  int64_t hi = t == DType::I64 ? INT64_MAX : t == DType::I32 ? INT32_MAX : 1;
  KILN_CHECK(v >= lo && v <= hi, "{}: {} is out of range for {} ({}..{})", where, v, dtype_name(t),
             lo, hi);
  return v;
}

double get_number(const ojson& j, const std::string& where) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "inf" || s == "+inf" || s == "infinity")
      return std::numeric_limits<double>::infinity();
    if (s == "-inf" || s == "-infinity") return -std::numeric_limits<double>::infinity();
  }
  KILN_CHECK(j.is_number(), "{}: expected a number, found {} {}", where, type_of(j), brief(j));
  double v = j.get<double>();
  KILN_CHECK(std::isfinite(v), "{}: expected a finite number, found {}", where, brief(j));
  return v;
}

const std::string& get_string(const ojson& j, const std::string& where, const char* what) {
  KILN_CHECK(j.is_string(), "{}: expected {}, found {} {}", where, what, type_of(j), brief(j));
  return j.get_ref<const std::string&>();
}

struct Loader {
  std::string src;       // the graph file's name, first in every message
  std::string base_dir;  // constant files are relative to it
  Graph g;
  int64_t constant_total = 0;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> files;  // by resolved path

  std::string at(const std::string& place) const { return fmt::format("{}: {}", src, place); }

  // Runs a builder call, prefixing its messages with the file and place when they lack them.
  template <class F>
  auto located(const std::string& where, F&& f) {
    try {
      return f();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::User) throw;
      std::string m = e.what();
      if (m.rfind(src + ":", 0) == 0) throw;
      throw Error(ErrorKind::User, fmt::format("{}: {}", where, m));
    }
  }

  // The product of the positive entries stays within the numel limit, the rank within its limit.
  void check_static_numel(const std::vector<int64_t>& dims, size_t rank, const std::string& where) {
    const LoadLimits& lim = load_limits();
    KILN_CHECK(static_cast<int64_t>(rank) <= lim.max_rank, "{}: rank {} is over the limit of {}",
               where, rank, lim.max_rank);
    int64_t n = 1;
    for (int64_t v : dims) {
      if (v <= 0) continue;
      KILN_CHECK(n <= lim.max_numel / v, "{}: more than {} elements (the limit)", where,
                 lim.max_numel);
      n *= v;
    }
  }

  // ---- tensor specs
  TensorDesc parse_desc(const ojson& spec, const std::string& where) {
    const LoadLimits& lim = load_limits();
    TensorDesc d;
    KILN_CHECK(spec.contains("dtype"), "{}: missing 'dtype' (f32, f16, bf16, i32, i64 or bool)",
               where);
    const std::string& dt = get_string(spec["dtype"], where + ".dtype", "a dtype name");
    KILN_CHECK(parse_dtype(dt, &d.dtype),
               "{}.dtype: expected f32, f16, bf16, i32, i64 or bool, found '{}'", where, dt);
    KILN_CHECK(spec.contains("shape"), "{}: missing 'shape' (a list of sizes and symbols)", where);
    const ojson& shape = spec["shape"];
    KILN_CHECK(shape.is_array(), "{}.shape: expected a list of sizes and symbols, found {} {}",
               where, type_of(shape), brief(shape));
    KILN_CHECK(static_cast<int64_t>(shape.size()) <= lim.max_rank,
               "{}.shape: rank {} is over the limit of {}", where, shape.size(), lim.max_rank);
    int64_t numel = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      std::string w = fmt::format("{}.shape[{}]", where, i);
      const ojson& dj = shape[i];
      if (dj.is_string()) {
        const std::string& s = dj.get_ref<const std::string&>();
        Dim e = is_identifier(s) ? Dim(s) : parse_dim(s, w);
        KILN_CHECK(!e.is_static() || e.value() > 0, "{}: '{}' is {}: a dim must be positive", w, s,
                   e.is_static() ? e.value() : 0);
        KILN_CHECK(!e.is_static() || e.value() <= lim.max_dim,
                   "{}: size {} is over the limit of {}", w, s, lim.max_dim);
        d.shape.push_back(std::move(e));
        continue;
      }
      KILN_CHECK(dj.is_number_integer(),
                 "{}: expected a positive integer or a symbol name, found {} {}", w, type_of(dj),
                 brief(dj));
      KILN_CHECK(!dj.is_number_integer() || dj.is_number_unsigned() || dj.get<int64_t>() > 0,
                 "{}: expected a positive integer or a symbol name, found {}", w, brief(dj));
      KILN_CHECK(dj.get<uint64_t>() <= static_cast<uint64_t>(lim.max_dim),
                 "{}: size {} is over the limit of {}", w, brief(dj), lim.max_dim);
      int64_t v = dj.get<int64_t>();
      KILN_CHECK(v > 0, "{}: expected a positive integer or a symbol name, found {}", w, v);
      KILN_CHECK(numel <= lim.max_numel / v, "{}.shape: more than {} elements", where,
                 lim.max_numel);
      numel *= v;
      d.shape.emplace_back(v);
    }
    bool has_layout = spec.contains("layout"), has_strides = spec.contains("strides");
    KILN_CHECK(!(has_layout && has_strides), "{}: give either 'layout' or 'strides', not both",
               where);
    if (has_layout) {
      const std::string& l = get_string(spec["layout"], where + ".layout", "\"NCHW\" or \"NHWC\"");
      if (l == "NCHW") {
        d.layout = Layout::NCHW;
      } else if (l == "NHWC") {
        KILN_CHECK(d.rank() == 4, "{}.layout: NHWC needs a 4-D tensor, found rank {}", where,
                   d.rank());
        d.layout = Layout::NHWC;
      } else {
        KILN_FAIL("{}.layout: expected \"NCHW\" or \"NHWC\", found '{}'", where, l);
      }
    }
    if (has_strides) {
      const ojson& st = spec["strides"];
      KILN_CHECK(st.is_array(), "{}.strides: expected a list of integers, found {} {}", where,
                 type_of(st), brief(st));
      KILN_CHECK(st.size() == shape.size(),
                 "{}.strides: expected {} strides (one per dim), found {}", where, shape.size(),
                 st.size());
      KILN_CHECK(shape_is_static(d.shape),
                 "{}.strides: explicit strides need a static shape, found {}", where,
                 shape_str(d.shape));
      for (size_t i = 0; i < st.size(); ++i) {
        std::string w = fmt::format("{}.strides[{}]", where, i);
        int64_t s = get_int(st[i], w, "a non-negative integer");
        KILN_CHECK(s >= 0 && s <= lim.max_numel,
                   "{}: expected a non-negative integer up to {}, found {}", w, lim.max_numel, s);
        d.strides.push_back(s);
      }
      d.layout = Layout::Strided;
    }
    return d;
  }

  void load_input(const std::string& name, const ojson& spec) {
    std::string where = at(fmt::format("inputs.{}", name));
    KILN_CHECK(!name.empty(), "{}: input names must not be empty", at("inputs"));
    KILN_CHECK(spec.is_object(), "{}: expected a tensor spec object, found {} {}", where,
               type_of(spec), brief(spec));
    check_keys(spec, {"dtype", "shape", "layout", "strides"}, where);
    TensorDesc d = parse_desc(spec, where);
    KILN_CHECK(g.find(name) < 0, "{}: tensor '{}' is defined twice", where, name);
    located(where, [&] { return g.input(name, d); });
  }

  void load_constant(const std::string& name, const ojson& spec) {
    const LoadLimits& lim = load_limits();
    std::string where = at(fmt::format("constants.{}", name));
    KILN_CHECK(!name.empty(), "{}: constant names must not be empty", at("constants"));
    KILN_CHECK(spec.is_object(), "{}: expected a tensor spec object, found {} {}", where,
               type_of(spec), brief(spec));
    check_keys(spec, {"dtype", "shape", "layout", "strides", "data", "file", "key", "init"}, where);
    TensorDesc d = parse_desc(spec, where);
    KILN_CHECK(g.find(name) < 0, "{}: tensor '{}' is already defined as {}", where, name,
               g.tensor(g.find(name)).role == TensorRole::Input ? "an input" : "a constant");
    KILN_CHECK(shape_is_static(d.shape), "{}.shape: constants need a static shape, found {}", where,
               shape_str(d.shape));
    std::vector<int64_t> shape = eval_shape(d.shape, {});
    int64_t numel = 1;
    for (int64_t v : shape) numel *= v;  // bounded by max_numel in parse_desc
    KILN_CHECK(numel <= lim.max_constant_numel,
               "{}.shape: {} elements is over the limit of {} for one constant", where, numel,
               lim.max_constant_numel);
    KILN_CHECK(constant_total + numel <= lim.max_total_constant_numel,
               "{}.shape: the constants of this file exceed the limit of {} elements in all", where,
               lim.max_total_constant_numel);
    constant_total += numel;
    int sources = spec.contains("data") + spec.contains("file") + spec.contains("init");
    KILN_CHECK(sources == 1, "{}: expected exactly one of 'data', 'file' or 'init', found {}",
               where, sources);
    KILN_CHECK(!spec.contains("key") || spec.contains("file"), "{}.key: 'key' needs 'file'", where);

    if (spec.contains("data") && !is_float(d.dtype)) {
      // Integer and bool constants are read exactly (an i64 id beyond 2^53 stays itself).
      const ojson& data = spec["data"];
      KILN_CHECK(data.is_array(), "{}.data: expected a flat list of integers, found {} {}", where,
                 type_of(data), brief(data));
      KILN_CHECK(static_cast<int64_t>(data.size()) == numel,
                 "{}.data: expected {} values for shape {}, found {}", where, numel,
                 shape_str(d.shape), data.size());
      check_host_bytes(fmt::format("{}.data ({} values)", where, numel),
                       static_cast<uint64_t>(numel) * (sizeof(int64_t) + dtype_size(d.dtype)));
      std::vector<int64_t> iv(data.size());
      for (size_t i = 0; i < data.size(); ++i)
        iv[i] = get_int_value(data[i], fmt::format("{}.data[{}]", where, i), d.dtype);
      located(where, [&] {
        return g.constant(name, d, HostTensor::from_i64(d.dtype, shape, iv), ConstantSource{});
      });
    } else if (spec.contains("data")) {
      const ojson& data = spec["data"];
      KILN_CHECK(data.is_array(), "{}.data: expected a flat list of numbers, found {} {}", where,
                 type_of(data), brief(data));
      KILN_CHECK(static_cast<int64_t>(data.size()) == numel,
                 "{}.data: expected {} values for shape {}, found {}", where, numel,
                 shape_str(d.shape), data.size());
      check_host_bytes(fmt::format("{}.data ({} values)", where, numel),
                       static_cast<uint64_t>(numel) * (sizeof(double) + dtype_size(d.dtype)));
      std::vector<double> v(data.size());
      for (size_t i = 0; i < data.size(); ++i) {
        const ojson& x = data[i];
        std::string w = fmt::format("{}.data[{}]", where, i);
        if (x.is_string()) {
          const std::string& s = x.get_ref<const std::string&>();
          if (s == "nan") {
            v[i] = std::numeric_limits<double>::quiet_NaN();
            continue;
          }
          v[i] = get_number(x, w);
          continue;
        }
        v[i] = get_number(x, w);
      }
      located(where, [&] {
        return g.constant(name, d, HostTensor::from_f64(d.dtype, shape, v), ConstantSource{});
      });
    } else if (spec.contains("file")) {
      ConstantSource s;
      s.kind = ConstantSource::Kind::File;
      s.file = get_string(spec["file"], where + ".file", "a file name");
      KILN_CHECK(!s.file.empty(), "{}.file: expected a file name, found an empty string", where);
      if (spec.contains("key")) {
        s.key = get_string(spec["key"], where + ".key", "a tensor name");
        KILN_CHECK(!s.key.empty(), "{}.key: expected a tensor name, found an empty string", where);
      }
      std::string key = s.key.empty() ? name : s.key;
      std::filesystem::path p(s.file);
      if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
      std::string path = p.lexically_normal().string();
      auto it = files.find(path);
      if (it == files.end()) {
        std::shared_ptr<const SafetensorsFile> f;
        try {
          f = std::make_shared<const SafetensorsFile>(path);
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::User) throw;
          KILN_FAIL("{}.file: {}", where, e.what());
        }
        it = files.emplace(path, std::move(f)).first;
      }
      const SafetensorsFile& f = *it->second;
      KILN_CHECK(f.has(key), "{}.key: no tensor '{}' in {} (the file has: {})", where, key, path,
                 f.key_list());
      const SafetensorsEntry& e = f.entries().at(key);
      DType fdt;
      KILN_CHECK(safetensors_dtype(e.dtype, &fdt),
                 "{}: tensor '{}' in {} has dtype {}, which kiln does not read (F32, F16, BF16, "
                 "I32, I64, BOOL)",
                 where, key, path, e.dtype);
      KILN_CHECK(fdt == d.dtype,
                 "{}.dtype: the constant is declared {} but tensor '{}' in {} is {} ({}); convert "
                 "the file or change the declaration",
                 where, dtype_name(d.dtype), key, path, e.dtype, dtype_name(fdt));
      KILN_CHECK(e.shape == shape,
                 "{}.shape: the constant is declared {} but tensor '{}' in {} has shape {} "
                 "(safetensors holds the logical shape)",
                 where, shape_str(d.shape), key, path,
                 shape_str(Shape(e.shape.begin(), e.shape.end())));
      // The data is read when first used: checking a graph reads only the header.
      auto read = [file = it->second, key, where] {
        try {
          return file->read(key);
        } catch (const Error& err) {
          if (err.kind() != ErrorKind::User) throw;
          KILN_FAIL("{}.file: {}", where, err.what());
        }
      };
      located(where, [&] { return g.constant_deferred(name, d, std::move(read), s); });
    } else {
      const ojson& init = spec["init"];
      std::string w = where + ".init";
      KILN_CHECK(init.is_object(),
                 "{}: expected {{\"normal\": {{\"mean\", \"std\"}}}} or {{\"uniform\": {{\"low\", "
                 "\"high\"}}}} with an optional \"seed\", found {} {}",
                 w, type_of(init), brief(init));
      check_keys(init, {"normal", "uniform", "seed"}, w);
      int dists = init.contains("normal") + init.contains("uniform");
      KILN_CHECK(dists == 1, "{}: expected exactly one of 'normal' or 'uniform', found {}", w,
                 dists);
      std::string dist = init.contains("normal") ? "normal" : "uniform";
      const ojson& p = init[dist];
      std::string wp = w + "." + dist;
      KILN_CHECK(p.is_object(), "{}: expected an object, found {} {}", wp, type_of(p), brief(p));
      const char* ka = dist == "normal" ? "mean" : "low";
      const char* kb = dist == "normal" ? "std" : "high";
      check_keys(p, {ka, kb}, wp);
      double a = p.contains(ka) ? get_number(p[ka], wp + "." + ka) : 0.0;
      double b = p.contains(kb) ? get_number(p[kb], wp + "." + kb) : 1.0;
      if (dist == "normal")
        KILN_CHECK(b >= 0, "{}.std: expected a number >= 0, found {}", wp, b);
      else
        KILN_CHECK(a <= b, "{}: low {} is greater than high {}", wp, a, b);
      uint64_t seed = 0;
      if (init.contains("seed")) {
        const ojson& sj = init["seed"];
        KILN_CHECK(sj.is_number_unsigned(), "{}.seed: expected a non-negative integer, found {}", w,
                   brief(sj));
        seed = sj.get<uint64_t>();
      }
      located(where, [&] { return g.constant_random(name, d, dist, a, b, seed); });
    }
  }

  // ---- nodes
  AttrValue parse_attr(const ojson& v, const AttrSpec* spec, const std::string& where) {
    const int64_t lim = load_limits().max_attr_int;
    auto bounded = [&](int64_t x, const std::string& w) {
      KILN_CHECK(x >= -lim && x <= lim, "{}: integer {} is out of range (|value| <= {})", w, x,
                 lim);
      return x;
    };
    if (spec && spec->kind == AttrKind::Int)
      KILN_CHECK(v.is_number_integer() || v.is_boolean(), "{}: expected an integer, found {} {}",
                 where, type_of(v), brief(v));
    if (v.is_boolean()) return int64_t{v.get<bool>() ? 1 : 0};
    if (v.is_number_integer()) {
      int64_t x = bounded(get_int(v, where, "an integer"), where);
      if (spec && spec->kind == AttrKind::Float) return static_cast<double>(x);
      return x;
    }
    if (v.is_number_float()) return get_number(v, where);
    if (v.is_string()) {
      // Float attributes accept "inf" / "-inf" (JSON has no infinity; clamp's defaults are).
      if (spec && spec->kind == AttrKind::Float) return get_number(v, where);
      return v.get<std::string>();
    }
    if (v.is_array() && spec && spec->kind == AttrKind::Floats) {
      std::vector<double> out;
      for (size_t i = 0; i < v.size(); ++i) {
        std::string w = fmt::format("{}[{}]", where, i);
        KILN_CHECK(v[i].is_number(), "{}: expected a number, found {} {}", w, type_of(v[i]),
                   brief(v[i]));
        out.push_back(get_number(v[i], w));
      }
      return out;
    }
    if (v.is_array()) {
      bool any_string = false;
      for (const ojson& e : v) any_string |= e.is_string();
      if (!any_string) {
        std::vector<int64_t> out;
        for (size_t i = 0; i < v.size(); ++i) {
          std::string w = fmt::format("{}[{}]", where, i);
          KILN_CHECK(v[i].is_number_integer(), "{}: expected an integer, found {} {}", w,
                     type_of(v[i]), brief(v[i]));
          out.push_back(bounded(get_int(v[i], w, "an integer"), w));
        }
        return out;
      }
      std::vector<Dim> out;
      for (size_t i = 0; i < v.size(); ++i) {
        std::string w = fmt::format("{}[{}]", where, i);
        if (v[i].is_string()) {
          const std::string& s = v[i].get_ref<const std::string&>();
          Dim e = is_identifier(s) ? Dim(s) : parse_dim(s, w);
          out.push_back(e.is_static() ? Dim(bounded(e.value(), w)) : e);
        } else {
          KILN_CHECK(v[i].is_number_integer(),
                     "{}: expected an integer or a symbol name, found {} {}", w, type_of(v[i]),
                     brief(v[i]));
          out.emplace_back(bounded(get_int(v[i], w, "an integer"), w));
        }
      }
      return out;
    }
    KILN_FAIL("{}: expected a number, a string or a list of integers/symbols, found {} {}", where,
              type_of(v), brief(v));
  }

  struct NodeSpec {
    const ojson* j = nullptr;
    std::string where;  // "g.json: nodes[3] (conv1)"
    std::string op, name;
    std::vector<std::string> inputs, outputs;
    Attrs attrs;
    std::vector<int> deps;  // indices of the nodes producing the inputs
  };

  NodeSpec parse_node(const ojson& n, size_t i) {
    NodeSpec s;
    s.j = &n;
    std::string base = at(fmt::format("nodes[{}]", i));
    KILN_CHECK(n.is_object(), "{}: expected a node object, found {} {}", base, type_of(n),
               brief(n));
    if (n.contains("name")) {
      s.name = get_string(n["name"], base + ".name", "a node name");
      KILN_CHECK(!s.name.empty(), "{}.name: expected a non-empty name", base);
    }
    s.where = s.name.empty() ? base : fmt::format("{} ({})", base, s.name);
    KILN_CHECK(n.contains("op"), "{}: missing 'op' (known ops: {})", s.where, all_op_names());
    s.op = get_string(n["op"], s.where + ".op", "an op name");
    const OpInfo* info = find_op(s.op);
    KILN_CHECK(info != nullptr, "{}.op: unknown op '{}' (known ops: {})", s.where, s.op,
               all_op_names());
    auto names = [&](const char* key, std::vector<std::string>* out) {
      std::string w = fmt::format("{}.{}", s.where, key);
      KILN_CHECK(n.contains(key), "{}: missing '{}' (a list of tensor names)", s.where, key);
      const ojson& l = n[key];
      KILN_CHECK(l.is_array(), "{}: expected a list of tensor names, found {} {}", w, type_of(l),
                 brief(l));
      for (size_t k = 0; k < l.size(); ++k) {
        std::string wk = fmt::format("{}[{}]", w, k);
        const std::string& t = get_string(l[k], wk, "a tensor name");
        KILN_CHECK(!t.empty(), "{}: expected a tensor name, found an empty string", wk);
        out->push_back(t);
      }
    };
    names("inputs", &s.inputs);
    names("outputs", &s.outputs);
    KILN_CHECK(!s.outputs.empty(), "{}.outputs: expected 1 output name, found none", s.where);
    // An op with several outputs (split) checks their count against its attributes when added.
    KILN_CHECK(info->several_outputs || s.outputs.size() == 1,
               "{}.outputs: op {} has 1 output, found {} output names", s.where, s.op,
               s.outputs.size());
    int n_in = static_cast<int>(s.inputs.size());
    KILN_CHECK(n_in >= info->min_inputs && n_in <= info->max_inputs,
               "{}.inputs: op {} takes {} input{}, found {}", s.where, s.op,
               info->min_inputs == info->max_inputs
                   ? std::to_string(info->min_inputs)
                   : fmt::format("{} to {}", info->min_inputs, info->max_inputs),
               info->max_inputs == 1 ? "" : "s", n_in);
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string& k = it.key();
      if (k == "op" || k == "name" || k == "inputs" || k == "outputs") continue;
      const AttrSpec* spec = nullptr;
      std::string valid;
      for (const AttrSpec& a : info->attrs) {
        if (k == a.name) spec = &a;
        valid += (valid.empty() ? "" : ", ") + std::string(a.name);
      }
      KILN_CHECK(spec != nullptr, "{}: unknown attribute '{}' for op {} (valid: {})", s.where, k,
                 s.op, valid.empty() ? "none" : valid);
      std::string wa = fmt::format("{}.{}", s.where, k);
      s.attrs[k] = parse_attr(it.value(), spec, wa);
      if (spec->kind == AttrKind::Dims) {
        // A shape: bounded like a declared one, so that shape arithmetic cannot overflow.
        if (const auto* dims = std::get_if<std::vector<Dim>>(&s.attrs[k])) {
          std::vector<int64_t> ints;
          for (const Dim& d : *dims)
            if (d.is_static()) ints.push_back(d.value());
          check_static_numel(ints, dims->size(), wa);
        } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&s.attrs[k])) {
          check_static_numel(*ints, ints->size(), wa);
        }
      }
    }
    return s;
  }

  void load_nodes(const ojson& nodes) {
    KILN_CHECK(nodes.is_array(), "{}: expected a list of nodes, found {} {}", at("nodes"),
               type_of(nodes), brief(nodes));
    std::vector<NodeSpec> specs;
    specs.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) specs.push_back(parse_node(nodes[i], i));

    // Every tensor is defined once: by an input, a constant, or one node output.
    std::map<std::string, int> producer;
    for (size_t i = 0; i < specs.size(); ++i) {
      for (size_t k = 0; k < specs[i].outputs.size(); ++k) {
        const std::string& t = specs[i].outputs[k];
        std::string w = fmt::format("{}.outputs[{}]", specs[i].where, k);
        int id = g.find(t);
        KILN_CHECK(id < 0, "{}: tensor '{}' is already defined as {}", w, t,
                   id >= 0 && g.tensor(id).role == TensorRole::Input ? "an input" : "a constant");
        auto [it, fresh] = producer.emplace(t, static_cast<int>(i));
        KILN_CHECK(fresh, "{}: tensor '{}' is defined twice (also by {})", w, t,
                   specs[it->second].where.substr(src.size() + 2));
      }
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      for (size_t k = 0; k < specs[i].inputs.size(); ++k) {
        const std::string& t = specs[i].inputs[k];
        if (g.find(t) >= 0) continue;
        auto it = producer.find(t);
        KILN_CHECK(it != producer.end(), "{}.inputs[{}]: tensor '{}' is not defined",
                   specs[i].where, k, t);
        specs[i].deps.push_back(it->second);
      }
    }

    // Topological order, keeping file order where the file already respects dependencies
    // (iterative DFS; a back edge is a cycle, reported with the nodes on it).
    std::vector<int> state(specs.size(), 0);  // 0 new, 1 on stack, 2 done
    std::vector<int> order;
    order.reserve(specs.size());
    for (size_t root = 0; root < specs.size(); ++root) {
      if (state[root]) continue;
      std::vector<std::pair<int, size_t>> stack{{static_cast<int>(root), 0}};
      state[root] = 1;
      while (!stack.empty()) {
        auto& [u, next] = stack.back();
        if (next < specs[u].deps.size()) {
          int v = specs[u].deps[next++];
          if (state[v] == 0) {
            state[v] = 1;
            stack.push_back({v, 0});
          } else if (state[v] == 1) {
            // The stack from v up to u is a dependency chain (each consumes the next one's
            // output) and u consumes v: list it in data-flow order, v first.
            std::vector<int> chain;
            bool in = false;
            for (const auto& [w, unused] : stack) {
              in |= w == v;
              if (in) chain.push_back(w);
            }
            std::string cyc = specs[v].where.substr(src.size() + 2);
            for (size_t c = chain.size(); c-- > 0;)
              cyc += " -> " + specs[chain[c]].where.substr(src.size() + 2);
            KILN_FAIL("{}: the nodes form a cycle: {} (each feeds the next)", at("nodes"), cyc);
          }
        } else {
          state[u] = 2;
          order.push_back(u);
          stack.pop_back();
        }
      }
    }
    for (int i : order) {
      const NodeSpec& s = specs[i];
      std::vector<Tensor> ins;
      for (const std::string& t : s.inputs) ins.push_back({g.find(t)});
      std::vector<Tensor> outs = g.add_node(s.op, ins, s.attrs, s.name, s.outputs, s.where);
      // Broadcasting can grow a shape past every input's: bound it before anything consumes it.
      for (size_t k = 0; k < outs.size(); ++k) {
        const Shape& sh = g.desc(outs[k]).shape;
        std::vector<int64_t> ints;
        for (const Dim& d : sh)
          if (d.is_static()) ints.push_back(d.value());
        check_static_numel(ints, sh.size(),
                           fmt::format("{}.outputs[{}] ({})", s.where, k, shape_str(sh)));
      }
    }
  }

  Graph load(const std::string& text) {
    ojson root = parse_json(text, src);
    KILN_CHECK(root.is_object(), "{}: expected a JSON object at the top level, found {}", src,
               type_of(root));
    check_keys(root, {"kiln", "name", "doc", "metadata", "inputs", "constants", "nodes", "outputs"},
               src);
    KILN_CHECK(root.contains("kiln"),
               "{}: missing \"kiln\": 1 (the format version; this kiln reads version 1)", src);
    const ojson& ver = root["kiln"];
    KILN_CHECK(ver.is_number_integer() && ver == 1,
               "{}: kiln: unsupported format version {} (this kiln reads version 1)", src,
               brief(ver));
    if (root.contains("name")) g.set_name(get_string(root["name"], at("name"), "a string"));
    if (root.contains("inputs")) {
      const ojson& ins = root["inputs"];
      KILN_CHECK(ins.is_object(), "{}: expected an object of tensor specs, found {} {}",
                 at("inputs"), type_of(ins), brief(ins));
      for (auto it = ins.begin(); it != ins.end(); ++it) load_input(it.key(), it.value());
    }
    if (root.contains("constants")) {
      const ojson& cs = root["constants"];
      KILN_CHECK(cs.is_object(), "{}: expected an object of tensor specs, found {} {}",
                 at("constants"), type_of(cs), brief(cs));
      for (auto it = cs.begin(); it != cs.end(); ++it) load_constant(it.key(), it.value());
    }
    if (root.contains("nodes")) load_nodes(root["nodes"]);
    KILN_CHECK(root.contains("outputs"), "{}: missing 'outputs' (a list of tensor names)", src);
    const ojson& outs = root["outputs"];
    KILN_CHECK(outs.is_array(), "{}: expected a list of tensor names, found {} {}", at("outputs"),
               type_of(outs), brief(outs));
    KILN_CHECK(!outs.empty(), "{}: expected at least one output, found an empty list",
               at("outputs"));
    std::set<std::string> seen;
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string w = at(fmt::format("outputs[{}]", i));
      const std::string& t = get_string(outs[i], w, "a tensor name");
      int id = g.find(t);
      KILN_CHECK(id >= 0, "{}: tensor '{}' is not defined", w, t);
      KILN_CHECK(seen.insert(t).second, "{}: tensor '{}' is listed twice", w, t);
      g.output({id});
    }
    g.prune();
    return std::move(g);
  }
};

std::string read_file(const std::string& path) {
  return read_regular_file(path, "graph file", static_cast<uint64_t>(load_limits().max_file_bytes));
}

// ------------------------------------------------------------------------------- saving

// The shortest text that reads back as the same double; always with '.' or 'e' so that it loads
// as a float, never as an integer.
std::string float_text(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A JSON value for a float: a number, or "inf"/"-inf"/"nan" (JSON has none of them).
ojson float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// Writes JSON with objects expanded and short values (or lists of scalars) on one line.
class Emitter {
 public:
  std::string out;

  void value(const ojson& j, int indent) {
    if (fits_one_line(j, indent)) {
      compact(j);
      return;
    }
    std::string pad(static_cast<size_t>(indent + 2), ' ');
    if (j.is_object()) {
      out += "{\n";
      size_t i = 0;
      for (auto it = j.begin(); it != j.end(); ++it, ++i) {
        out += pad;
        out += ojson(it.key()).dump();
        out += ": ";
        value(it.value(), indent + 2);
        out += i + 1 < j.size() ? ",\n" : "\n";
      }
      out += std::string(static_cast<size_t>(indent), ' ') + "}";
    } else {
      out += "[\n";
      for (size_t i = 0; i < j.size(); ++i) {
        out += pad;
        value(j[i], indent + 2);
        out += i + 1 < j.size() ? ",\n" : "\n";
      }
      out += std::string(static_cast<size_t>(indent), ' ') + "]";
    }
  }

 private:
  static bool scalar_list(const ojson& j) {
    return j.is_array() &&
           std::none_of(j.begin(), j.end(), [](const ojson& e) { return e.is_structured(); });
  }
  // Scalars, lists of scalars, anything short, and objects of scalars (nodes, tensor specs with
  // inline data) go on one line; the rest is expanded.
  static bool fits_one_line(const ojson& j, int indent) {
    if (!j.is_structured() || j.empty() || scalar_list(j)) return true;
    Emitter probe;
    probe.compact(j);
    if (static_cast<int>(probe.out.size()) + indent <= 100) return true;
    if (!j.is_object()) return false;
    return std::all_of(j.begin(), j.end(),
                       [](const ojson& e) { return !e.is_structured() || scalar_list(e); });
  }
  void compact(const ojson& j) {
    if (j.is_object()) {
      out += "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out += first ? "" : ", ";
        first = false;
        out += ojson(it.key()).dump();
        out += ": ";
        compact(it.value());
      }
      out += "}";
    } else if (j.is_array()) {
      out += "[";
      for (size_t i = 0; i < j.size(); ++i) {
        out += i ? ", " : "";
        compact(j[i]);
      }
      out += "]";
    } else if (j.is_number_float()) {
      out += float_text(j.get<double>());
    } else {
      out += j.dump();
    }
  }
};

// A symbolic dim has a graph-file form when its text reads back as the same dim: symbols with
// identifier names, and canonical expressions (not the plain trees past the size caps).
bool writable(const Dim& d) {
  if (d.is_symbol()) return is_identifier(d.symbol());
  try {
    return parse_dim(d.str(), "dim") == d && parse_dim(d.str(), "dim").str() == d.str();
  } catch (const Error&) {
    return false;
  }
}

ojson shape_json(const Shape& s, const std::string& where) {
  ojson a = ojson::array();
  for (size_t i = 0; i < s.size(); ++i) {
    const Dim& d = s[i];
    if (d.is_static()) {
      a.push_back(d.value());
    } else {
      KILN_CHECK(writable(d),
                 "{}.shape[{}]: '{}' cannot be written to a graph file (its text does not read "
                 "back as the same dim)",
                 where, i, d.str());
      a.push_back(d.str());
    }
  }
  return a;
}

ojson desc_json(const TensorDesc& d, const std::string& where) {
  ojson j = ojson::object();
  j["dtype"] = dtype_name(d.dtype);
  j["shape"] = shape_json(d.shape, where);
  if (d.layout == Layout::NHWC) j["layout"] = "NHWC";
  if (d.layout == Layout::Strided) j["strides"] = d.strides;
  return j;
}

ojson attr_json(const AttrValue& v, const std::string& where) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* f = std::get_if<double>(&v)) return float_json(*f);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) return *l;
  if (const auto* l = std::get_if<std::vector<double>>(&v)) {
    ojson a = ojson::array();
    for (double f : *l) a.push_back(float_json(f));
    return a;
  }
  const auto& dims = std::get<std::vector<Dim>>(v);
  ojson a = ojson::array();
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = dims[i];
    if (d.is_static()) {
      a.push_back(d.value());
    } else {
      KILN_CHECK(writable(d),
                 "{}[{}]: '{}' cannot be written to a graph file (its text does not read back as "
                 "the same dim)",
                 where, i, d.str());
      a.push_back(d.str());
    }
  }
  return a;
}

}  // namespace

Graph load_graph_string(const std::string& text, const std::string& source_name,
                        const std::string& base_dir) {
  try {
    Loader l;
    l.src = source_name;
    l.base_dir = base_dir;
    return l.load(text);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    KILN_FAIL("{}: out of memory while loading (a tensor too large for this machine?)",
              source_name);
  } catch (const std::exception& e) {
    KILN_FAIL("{}: {}", source_name, e.what());
  }
}

Graph load_graph_file(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    KILN_FAIL("{}: cannot read graph file: {}", path, e.what());
  }
  std::filesystem::path p(path);
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  Graph g = load_graph_string(text, path, dir);
  return g;
}

namespace {

// A float constant with more elements than this goes to the weights file beside a saved graph
// file: the graph file holds structure and small values (text, under the loader's size limit),
// the weights file holds the tensors (binary, exact).
constexpr int64_t kInlineElements = 256;

// The graph-file text; with `spill`, float data constants over kInlineElements are moved into
// *spill and referenced as tensors of `weights_file`.
std::string graph_text(const Graph& g, const std::string& weights_file,
                       std::map<std::string, HostTensor>* spill) {
  ojson root = ojson::object();
  root["kiln"] = 1;
  root["name"] = g.name();
  ojson inputs = ojson::object(), constants = ojson::object(), nodes = ojson::array();
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    inputs[t.name] = desc_json(t.desc, fmt::format("input '{}'", t.name));
  }
  for (const TensorInfo& t : g.tensors()) {
    if (t.role != TensorRole::Constant) continue;
    std::string where = fmt::format("constant '{}'", t.name);
    ojson c = desc_json(t.desc, where);
    const ConstantSource& s = t.source;
    switch (s.kind) {
      case ConstantSource::Kind::Data: {
        KILN_ASSERT(t.data.has_value(), "constant {} has no data", t.name);
        if (spill && is_float(t.desc.dtype) && t.data->numel() > kInlineElements) {
          (*spill)[t.name] = *t.data;
          c["file"] = weights_file;
          break;
        }
        ojson data = ojson::array();
        if (!is_float(t.desc.dtype)) {
          for (int64_t v : t.data->to_i64())
            data.push_back(t.desc.dtype == DType::Bool ? ojson(v != 0) : ojson(v));
          c["data"] = std::move(data);
          break;
        }
        // Values are exactly representable as f32 (every kiln dtype is): the shortest f32 text
        // reads back to the same value.
        for (double v : t.data->to_f64()) {
          if (!std::isfinite(v)) {
            data.push_back(float_json(v));
          } else {
            float f = static_cast<float>(v);
            std::string txt = fmt::format("{}", f);
            double back = std::strtod(txt.c_str(), nullptr);
            if (back == std::floor(back) && std::fabs(back) < 1e15 && !std::signbit(back))
              data.push_back(static_cast<int64_t>(back));
            else
              data.push_back(back);
          }
        }
        c["data"] = std::move(data);
        break;
      }
      case ConstantSource::Kind::File:
        if (spill && s.file == weights_file) {  // the file this save rewrites: carried over
          (*spill)[t.name] = *t.data;
          c["file"] = weights_file;
          break;
        }
        c["file"] = s.file;
        if (!s.key.empty()) c["key"] = s.key;
        break;
      case ConstantSource::Kind::Init: {
        ojson params = ojson::object();
        if (s.dist == "normal") {
          params["mean"] = float_json(s.a);
          params["std"] = float_json(s.b);
        } else {
          params["low"] = float_json(s.a);
          params["high"] = float_json(s.b);
        }
        ojson init = ojson::object();
        init[s.dist] = std::move(params);
        init["seed"] = s.seed;
        c["init"] = std::move(init);
        break;
      }
    }
    constants[t.name] = std::move(c);
  }
  for (const Node& n : g.nodes()) {
    ojson j = ojson::object();
    j["op"] = op_name(n.op);
    j["name"] = n.name;
    ojson ins = ojson::array(), outs = ojson::array();
    for (int t : n.inputs) ins.push_back(g.tensor(t).name);
    for (int t : n.outputs) outs.push_back(g.tensor(t).name);
    j["inputs"] = std::move(ins);
    j["outputs"] = std::move(outs);
    for (const auto& [k, v] : n.attrs)
      j[k] = attr_json(v, fmt::format("node '{}' ({}).{}", n.name, op_name(n.op), k));
    nodes.push_back(std::move(j));
  }
  root["inputs"] = std::move(inputs);
  root["constants"] = std::move(constants);
  root["nodes"] = std::move(nodes);
  ojson outs = ojson::array();
  for (int id : g.outputs()) outs.push_back(g.tensor(id).name);
  root["outputs"] = std::move(outs);
  Emitter e;
  e.value(root, 0);
  e.out += "\n";
  return e.out;
}

}  // namespace

std::string save_graph_string(const Graph& g) {
  return graph_text(g, "", nullptr);
}

void save_graph_file(const Graph& g, const std::string& path) {
  // The weights beside the graph: <stem>.safetensors, named relative to the graph file.
  std::filesystem::path p(path);
  std::string weights = p.stem().string() + ".safetensors";
  std::map<std::string, HostTensor> spill;
  std::string text = graph_text(g, weights, &spill);
  if (!spill.empty()) write_safetensors((p.parent_path() / weights).string(), spill);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(f.good(), "{}: cannot write graph file: {}", path, std::strerror(errno));
  f << text;
  f.close();
  KILN_CHECK(f.good(), "{}: write failed: {}", path, std::strerror(errno));
}

}  // namespace kiln
