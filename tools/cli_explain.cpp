// `kiln explain`: the fused plan as text (groups, nodes, kernels, bytes, FLOPs, a roofline bound
// and predicted time per kernel; with --bench the measured time) and as Graphviz DOT.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "kiln/device.hpp"
#include "kiln/io.hpp"
#include "kiln/lowering.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"

namespace kiln::cli {
namespace {

// Peak FLOP rates (FLOP/s) used for the compute roof: tensor-core rate for f16/bf16 contractions,
// the CUDA-core f32 rate otherwise. Dense, no sparsity; numbers from the vendor data sheets.
struct FlopRates {
  double f32 = 0;     // CUDA cores (FMA = 2 FLOPs)
  double tensor = 0;  // f16/bf16 tensor cores, dense
};
FlopRates flop_rates(const DeviceFacts& d) {
  if (d.sm >= 90)
    return {66.9e12 * d.sm_count / 132.0, 989.4e12 * d.sm_count / 132.0};              // H100/H200
  if (d.sm >= 80) return {19.5e12 * d.sm_count / 108.0, 312e12 * d.sm_count / 108.0};  // A100
  return {14e12, 112e12};
}

struct KernelEstimate {
  std::string kind;
  DType dtype = DType::F32;
  int64_t bytes = 0, flops = 0;
  double mem_ms = 0, compute_ms = 0, predicted_ms = 0;
  bool compute_bound = false;
  double measured_ms = -1;
};

std::string human(double v, const char* unit) {
  const char* p[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", v, p[i], unit);
}

std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// Colours for the group clusters (fill, border), cycled.
const char* kFill[] = {"#dbeafe", "#dcfce7", "#fef3c7", "#fce7f3", "#ede9fe",
                       "#cffafe", "#fee2e2", "#e0e7ff", "#f3e8ff", "#ecfccb"};
const char* kBorder[] = {"#2563eb", "#16a34a", "#d97706", "#db2777", "#7c3aed",
                         "#0891b2", "#dc2626", "#4f46e5", "#9333ea", "#65a30d"};

std::string shape_of(const Graph& g, int id, const Bindings& b) {
  return dims_str(eval_shape(g.tensor(id).desc.shape, b));
}

std::string to_dot(const Lowering& low, const std::vector<KernelEstimate>& est, const Bindings& b) {
  const Graph& g = *low.graph;
  const std::vector<LoweredKernel>& ks = low.kernels;
  std::string s = fmt::format(
      "digraph \"{}\" {{\n  rankdir=TB;\n  newrank=true;\n  fontname=\"Helvetica\";\n"
      "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", "
      "fontsize=8, color=\"#555555\"];\n  label=\"{}: {} kernels for {} nodes\";\n  labelloc=t;\n",
      dot_escape(g.name()), dot_escape(g.name()), ks.size(), g.nodes().size());
  // Graph inputs, constants and outputs.
  for (int id : g.inputs())
    s += fmt::format(
        "  t{} [label=\"{}\\n{} {}\", shape=invhouse, style=filled, fillcolor=\"#bbf7d0\"];\n", id,
        dot_escape(g.tensor(id).name), dtype_name(g.tensor(id).desc.dtype), shape_of(g, id, b));
  for (size_t id = 0; id < g.tensors().size(); ++id)
    if (g.tensors()[id].role == TensorRole::Constant)
      s += fmt::format(
          "  t{} [label=\"{}\\n{}\", shape=note, style=filled, fillcolor=\"#f1f5f9\", "
          "fontsize=8, color=\"#94a3b8\"];\n",
          id, dot_escape(g.tensors()[id].name), shape_of(g, static_cast<int>(id), b));
  for (int id : g.outputs())
    s += fmt::format(
        "  out{} [label=\"{}\\n{} {}\", shape=house, style=filled, fillcolor=\"#fecaca\"];\n", id,
        dot_escape(g.tensor(id).name), dtype_name(g.tensor(id).desc.dtype), shape_of(g, id, b));
  // One cluster per fusion group.
  for (size_t gi = 0; gi < low.groups.size(); ++gi) {
    const LoweredGroup& grp = low.groups[gi];
    // The group's kernels (a split channel norm has two), one line each.
    std::string kname, extra;
    for (size_t k = 0; k < ks.size(); ++k)
      if (ks[k].group == grp.id) {
        kname += (kname.empty() ? "" : "\\n") + dot_escape(ks[k].name);
        extra += fmt::format("\\n{}-bound, predicted {:.4f} ms",
                             est[k].compute_bound ? "compute" : "memory", est[k].predicted_ms);
        if (est[k].measured_ms >= 0)
          extra += fmt::format(", measured {:.4f} ms", est[k].measured_ms);
      }
    size_t c = gi % (sizeof(kFill) / sizeof(kFill[0]));
    s += fmt::format(
        "  subgraph cluster_g{} {{\n    label=\"group {} ({})\\n{}{}\";\n    "
        "style=\"filled,rounded\";"
        "\n    fillcolor=\"{}\";\n    color=\"{}\";\n    penwidth=2;\n",
        grp.id, grp.id, grp.kind, kname, extra, kFill[c], kBorder[c]);
    for (int n : grp.nodes) {
      const Node& nd = g.nodes()[n];
      s += fmt::format(
          "    n{} [label=\"{}\\n{}\", shape=box, style=\"filled,rounded\", "
          "fillcolor=white, color=\"{}\"{}];\n",
          n, dot_escape(nd.name), op_name(nd.op), kBorder[c],
          n == grp.anchor ? ", penwidth=2" : "");
    }
    s += "  }\n";
  }
  // Edges: tensor producers to consumers (intermediates labelled with their name and shape).
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    for (int t : g.nodes()[n].inputs) {
      const TensorInfo& ti = g.tensor(t);
      if (ti.role == TensorRole::Intermediate && ti.producer >= 0)
        s += fmt::format("  n{} -> n{} [label=\"{} {}\"];\n", ti.producer, n, dot_escape(ti.name),
                         shape_of(g, t, b));
      else
        s += fmt::format("  t{} -> n{};\n", t, n);
    }
  }
  for (int id : g.outputs()) {
    const TensorInfo& ti = g.tensor(id);
    if (ti.role == TensorRole::Intermediate && ti.producer >= 0)
      s += fmt::format("  n{} -> out{};\n", ti.producer, id);
    else
      s += fmt::format("  t{} -> out{};\n", id, id);
  }
  s += "}\n";
  return s;
}

// The roofline estimate of every kernel for bindings `b`: bytes and FLOPs against the device's
// DRAM bandwidth and peak FLOP rate (tensor cores for 16-bit contractions and attention).
std::vector<KernelEstimate> estimate(const Lowering& low, const DeviceFacts& dev,
                                     const Bindings& b) {
  const Graph& g = *low.graph;
  const FlopRates rates = flop_rates(dev);
  std::vector<KernelEstimate> est(low.kernels.size());
  for (size_t k = 0; k < low.kernels.size(); ++k) {
    const LoweredKernel& kernel = low.kernels[k];
    KernelEstimate& e = est[k];
    const LoweredGroup* grp = nullptr;
    for (const LoweredGroup& gr : low.groups)
      if (gr.id == kernel.group) grp = &gr;
    KILN_ASSERT(grp != nullptr, "kernel {} has no group {}", kernel.name, kernel.group);
    e.kind = grp->kind;
    int node = grp->anchor >= 0 ? grp->anchor : grp->nodes.front();
    e.dtype = g.tensor(g.nodes()[node].outputs.front()).desc.dtype;
    e.bytes = kernel.bytes_moved.eval(b);
    e.flops = kernel.flops.eval(b);
    const bool mma = grp->kind == "contraction" || grp->kind == "attention";
    double rate = mma && e.dtype != DType::F32 ? rates.tensor : rates.f32;
    e.mem_ms = static_cast<double>(e.bytes) / dev.mem_bandwidth * 1e3;
    e.compute_ms = static_cast<double>(e.flops) / rate * 1e3;
    e.compute_bound = e.compute_ms > e.mem_ms;
    e.predicted_ms = std::max(e.mem_ms, e.compute_ms);
  }
  return est;
}

// --bench: every kernel of the graph the Engine compiles, timed on the GPU (CUDA events, median
// of `iters`), into the estimate of the kernel of the same name.
void measure(const Args& a, const Graph& g, const Bindings& shapes, const Lowering& low, int device,
             std::vector<KernelEstimate>* est) {
  std::string why;
  KILN_CHECK(gpu_available(&why), "explain --bench: {}", why);
  int iters = static_cast<int>(parse_int("explain", "--iters", a.get("--iters", "20"), 1));
  InputOptions io;
  io.shapes = shapes;
  PreparedInputs in = prepare_inputs("explain", g, io);
  EngineOptions eo;
  eo.fusion = !a.has("--no-fusion");
  eo.device = device;
  DeviceSession s(g, in.tensors, in.bindings, eo);
  s.run();
  std::vector<double> t = s.compiled().time_kernels(s.inputs(), s.outputs(), 3, iters);
  const std::vector<KernelInfo>& infos = s.compiled().kernels();
  for (size_t i = 0; i < infos.size() && i < t.size(); ++i)
    for (size_t k = 0; k < low.kernels.size(); ++k)
      if (low.kernels[k].name == infos[i].name) (*est)[k].measured_ms = t[i];
}

// The text: a header (device, bindings, notes, roofs), then every kernel with its estimate.
void print_explain(const Graph& g, const Lowering& low, const DeviceFacts& dev,
                   const Bindings& shapes, const std::vector<std::string>& defaulted,
                   const std::vector<KernelEstimate>& est) {
  const Graph& pg = *low.graph;
  const std::vector<LoweredKernel>& ks = low.kernels;
  const FlopRates rates = flop_rates(dev);
  std::string bind_text;
  for (const auto& [k, v] : shapes)
    bind_text += fmt::format("{}{}={}", bind_text.empty() ? "" : ", ", k, v);
  fmt::print("explain '{}' ({}) on {} [{}]\n", g.name(),
             bind_text.empty() ? "static shapes" : bind_text, dev.name, dev.arch);
  if (!defaulted.empty())
    fmt::print("note: unbound symbol{} {} set to 1 (use --shape SYM=V)\n",
               defaulted.size() == 1 ? "" : "s", fmt::join(defaulted, ", "));
  if (!low.passes_note.empty()) fmt::print("note: {}\n", low.passes_note);
  fmt::print("roofline: memory {}/s, f32 {}/s, f16/bf16 tensor {}/s\n",
             human(dev.mem_bandwidth, "B"), human(rates.f32, "FLOP"), human(rates.tensor, "FLOP"));
  fmt::print("{} kernel{} for {} node{}\n\n", ks.size(), ks.size() == 1 ? "" : "s",
             pg.nodes().size(), pg.nodes().size() == 1 ? "" : "s");
  double total_pred = 0, total_meas = 0;
  bool measured = false;
  for (size_t k = 0; k < ks.size(); ++k) {
    const KernelEstimate& e = est[k];
    std::vector<std::string> nodes;
    for (const LoweredGroup& gr : low.groups)
      if (gr.id == ks[k].group)
        for (int n : gr.nodes)
          nodes.push_back(fmt::format("{} ({})", pg.nodes()[n].name, op_name(pg.nodes()[n].op)));
    fmt::print("group {} [{}, {}]  kernel {}\n", ks[k].group, e.kind, dtype_name(e.dtype),
               ks[k].name);
    fmt::print("  nodes: {}\n", fmt::join(nodes, ", "));
    double intensity = e.bytes > 0 ? static_cast<double>(e.flops) / e.bytes : 0;
    fmt::print("  bytes {}  flops {}  intensity {:.2f} FLOP/B  -> {}-bound, predicted {:.4f} ms\n",
               human(static_cast<double>(e.bytes), "B"),
               human(static_cast<double>(e.flops), "FLOP"), intensity,
               e.compute_bound ? "compute" : "memory", e.predicted_ms);
    if (e.measured_ms >= 0) {
      fmt::print("  measured {:.4f} ms ({:.0f}% of the roofline)\n", e.measured_ms,
                 100.0 * e.predicted_ms / e.measured_ms);
      total_meas += e.measured_ms;
      measured = true;
    }
    total_pred += e.predicted_ms;
  }
  fmt::print("\ntotal predicted {:.4f} ms", total_pred);
  if (measured) fmt::print(", measured {:.4f} ms (sum of kernel medians)", total_meas);
  fmt::print("\n");
}

int run_explain(const std::vector<std::string>& argv) {
  Args a = parse_args("explain", argv,
                      {{"--shape", true, true},
                       {"--arch", true, false},
                       {"--no-fusion", false, false},
                       {"--dot", true, false},
                       {"--bench", false, false},
                       {"--iters", true, false},
                       {"--device", true, false}},
                      1, 1);
  Graph g = load_graph_file(a.positional[0]);
  Bindings shapes = parse_shape_flags("explain", a.all("--shape"), g);
  std::vector<std::string> defaulted;
  for (const std::string& sym : g.symbols())
    if (!shapes.count(sym)) {
      shapes[sym] = 1;
      defaulted.push_back(sym);
    }
  // Binding checks every tensor's size, so a shape that overflows names its tensor here.
  shapes = g.bind({}, shapes);
  const bool gpu = cuda_available();
  // --device gpu:N: that GPU's facts, and the one --bench measures on.
  const int device =
      a.has("--device") ? parse_device_flag("explain", a.get("--device"), false).ordinal : 0;
  if (a.has("--device")) require_gpu("explain", device);
  DeviceFacts dev;
  if (a.has("--arch"))
    dev = default_device(a.get("--arch"));
  else
    dev = gpu ? query_device(device) : default_device("sm_90");
  // What the Engine builds: the graph after its passes (batchnorm folding), its arch's kernels.
  LoweringOptions lo;
  lo.target = dev;
  lo.fusion = !a.has("--no-fusion");
  const Lowering low = lower_graph(g, lo);
  std::vector<KernelEstimate> est = estimate(low, dev, shapes);
  if (a.has("--bench")) measure(a, g, shapes, low, device, &est);
  print_explain(g, low, dev, shapes, defaulted, est);

  if (a.has("--dot")) {
    std::string file = a.get("--dot");
    std::string dot = to_dot(low, est, shapes);
    if (file == "-") {
      fmt::print("{}", dot);
    } else {
      std::ofstream os(file);
      os << dot;
      KILN_CHECK(os.good(), "explain: cannot write --dot {}", file);
      fmt::print("wrote {} (render: dot -Tsvg {} -o plan.svg)\n", file, file);
    }
  }
  return 0;
}

}  // namespace

KILN_CLI_COMMAND(
    explain, "explain", "the fused plan with a roofline estimate per kernel, as text and DOT",
    "usage: kiln explain GRAPH [--shape SYM=V ...] [--arch sm_XX] [--no-fusion]\n"
    "                    [--dot FILE|-] [--bench [--iters I]] [--device gpu:N]\n\n"
    "Prints every fusion group with its nodes and kernel, the bytes it moves and the FLOPs\n"
    "it does for the bound shapes (unbound symbols default to 1), and a roofline bound:\n"
    "memory-bound when bytes / DRAM bandwidth exceeds FLOPs / peak FLOP rate (tensor-core\n"
    "rate for f16/bf16 contractions, CUDA-core f32 otherwise), with the predicted time.\n"
    "--bench also measures each kernel on the GPU (CUDA events, median of I runs).\n"
    "--device gpu:N: GPU N's facts (and --bench's GPU) instead of GPU 0's.\n"
    "--dot writes the plan as Graphviz DOT: each fusion group a coloured cluster of its\n"
    "nodes, edges between tensors, inputs/constants/outputs as their own shapes.\n",
    run_explain);

}  // namespace kiln::cli
