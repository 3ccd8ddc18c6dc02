// `kiln check GRAPH [--json]`: loads and validates a graph file and prints every tensor's
// inferred type (as text, or as one JSON object for tools such as the ONNX importer).
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <variant>

#include "kiln/io.hpp"
#include "tools/cli_common.hpp"

namespace kiln::cli {
namespace {

const char* role_name(TensorRole r) {
  switch (r) {
    case TensorRole::Input:
      return "input";
    case TensorRole::Constant:
      return "constant";
    case TensorRole::Intermediate:
      return "intermediate";
  }
  return "?";
}

std::string attr_str(const AttrValue& v) {
  struct V {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return fmt::format("{}", d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<int64_t>& l) const { return dims_str(l); }
    std::string operator()(const std::vector<Dim>& l) const { return shape_str(l); }
    std::string operator()(const std::vector<double>& l) const {
      return fmt::format("[{}]", fmt::join(l, ", "));
    }
  };
  return std::visit(V{}, v);
}

std::string source_str(const TensorInfo& t) {
  const ConstantSource& s = t.source;
  switch (s.kind) {
    case ConstantSource::Kind::Data:
      return "inline data";
    case ConstantSource::Kind::File:
      return fmt::format("file {}[{}]", s.file, s.key.empty() ? t.name : s.key);
    case ConstantSource::Kind::Init:
      return s.dist == "uniform" ? fmt::format("init uniform({}, {}) seed {}", s.a, s.b, s.seed)
                                 : fmt::format("init normal({}, {}) seed {}", s.a, s.b, s.seed);
  }
  return "?";
}

// --json: {"graph", "symbols", "inputs", "outputs", "tensors": {name: {"role", "dtype",
// "shape", "layout"[, "strides"]}}} with tensors in graph order; a static dim is a number, a
// symbolic one its text ("N", or an expression such as "((H+2)-3)/1+1").
void print_json(const Graph& g) {
  nlohmann::ordered_json j;
  j["graph"] = g.name();
  j["symbols"] = g.symbols();
  j["inputs"] = nlohmann::ordered_json::array();
  for (int id : g.inputs()) j["inputs"].push_back(g.tensor(id).name);
  j["outputs"] = nlohmann::ordered_json::array();
  for (int id : g.outputs()) j["outputs"].push_back(g.tensor(id).name);
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const TensorInfo& t : g.tensors()) {
    nlohmann::ordered_json shape = nlohmann::ordered_json::array();
    for (const Dim& d : t.desc.shape) {
      if (d.is_static())
        shape.push_back(d.value());
      else
        shape.push_back(d.str());
    }
    nlohmann::ordered_json e = {{"role", role_name(t.role)},
                                {"dtype", dtype_name(t.desc.dtype)},
                                {"shape", shape},
                                {"layout", layout_name(t.desc.layout)}};
    if (t.desc.layout == Layout::Strided) e["strides"] = t.desc.strides;
    tensors[t.name] = e;
  }
  j["tensors"] = tensors;
  fmt::print("{}\n", j.dump());
}

int run_check(const std::vector<std::string>& argv) {
  Args a = parse_args("check", argv, {{"--json", false, false}}, 1, 1);
  const std::string& path = a.positional[0];
  Graph g = load_graph_file(path);
  if (a.has("--json")) {
    print_json(g);
    return 0;
  }

  size_t w = 8;
  for (const TensorInfo& t : g.tensors()) w = std::max(w, t.name.size());
  std::vector<std::string> syms = g.symbols();
  std::string sym_list;
  for (const std::string& s : syms) sym_list += (sym_list.empty() ? "" : ", ") + s;

  auto plural = [](size_t n, const char* what) {
    return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
  };
  size_t n_const = std::count_if(g.tensors().begin(), g.tensors().end(), [](const TensorInfo& t) {
    return t.role == TensorRole::Constant;
  });
  fmt::print("{}: graph '{}' is valid: {}, {}, {}, {}\n", path, g.name(),
             plural(g.inputs().size(), "input"), plural(n_const, "constant"),
             plural(g.nodes().size(), "node"), plural(g.outputs().size(), "output"));
  fmt::print("symbols: {}\n", syms.empty() ? std::string("none (all shapes static)") : sym_list);

  fmt::print("\ninputs:\n");
  for (int id : g.inputs())
    fmt::print("  {:<{}}  {}\n", g.tensor(id).name, w, g.tensor(id).desc.str());

  fmt::print("\nconstants:\n");
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Constant)
      fmt::print("  {:<{}}  {:<28}  {}\n", t.name, w, t.desc.str(), source_str(t));

  fmt::print("\nnodes:\n");
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    std::string ins, attrs;
    for (int t : n.inputs) ins += (ins.empty() ? "" : ", ") + g.tensor(t).name;
    for (const auto& [k, v] : n.attrs) attrs += fmt::format(" {}={}", k, attr_str(v));
    fmt::print("  [{}] {} = {}({}){}\n", i, n.name, op_name(n.op), ins, attrs);
    for (int t : n.outputs)
      fmt::print("      -> {:<{}}  {}\n", g.tensor(t).name, w, g.tensor(t).desc.str());
  }

  fmt::print("\noutputs:\n");
  for (int id : g.outputs()) {
    const TensorInfo& t = g.tensor(id);
    std::string from = t.role == TensorRole::Intermediate && t.producer >= 0
                           ? fmt::format("from [{}] {}", t.producer, g.nodes()[t.producer].name)
                           : fmt::format("the {} itself", role_name(t.role));
    fmt::print("  {:<{}}  {}  ({})\n", t.name, w, t.desc.str(), from);
  }
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    check, "check", "load and validate a graph file; print every tensor's type",
    "usage: kiln check GRAPH [--json]\n"
    "\n"
    "Loads GRAPH (a kiln graph file, version 1), checks every rule of the format and\n"
    "infers every tensor's shape, dtype and layout. Prints the symbols, the inputs, the\n"
    "constants (with where their data comes from), every node with its attributes and\n"
    "output types, and the outputs. A bad file is refused with one message naming the\n"
    "file and the place in it, and exit status 2.\n"
    "\n"
    "  --json   print one JSON object instead: graph, symbols, inputs, outputs, and tensors\n"
    "           (every tensor by name: role, dtype, shape with numbers for static dims and\n"
    "           strings for symbolic ones, layout, and strides for a strided layout)\n",
    run_check);

}  // namespace kiln::cli
