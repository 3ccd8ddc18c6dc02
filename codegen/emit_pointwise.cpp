// Pointwise groups: an elementwise DAG (broadcast operands allowed) over one iteration shape,
// possibly with several outputs. Each thread handles one 16-byte vector of the widest densely
// indexed tensor (dense = same shape and strides as the first output: read/written by linear
// index); broadcast operands are indexed through their own strides from the element's
// coordinates. The last partial vector takes a scalar path, so any size and alignment of the
// element count works; the grid covers the tensor once (no grid-stride loop).
#include <algorithm>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/check.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {

KernelSpec emit_pointwise(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(!grp.nodes.empty() && !grp.outputs.empty(), "empty pointwise group {}", grp.id);
  const TensorDesc& out0 = g.tensor(grp.outputs[0]).desc;
  const Shape iter = out0.shape;
  for (int n : grp.nodes) {
    KILN_ASSERT(is_elementwise(g, g.nodes()[n]), "group {}: node {} is not elementwise", grp.id,
                g.nodes()[n].name);
    KILN_ASSERT(g.tensor(g.nodes()[n].outputs[0]).desc.shape == iter,
                "group {}: node {} has another iteration shape", grp.id, g.nodes()[n].name);
  }
  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  ElementLoader probe{g, iter, tensor_strides(out0), "", {}, nullptr, "", {}};
  std::vector<int> dense_in, dense_out, other_out;
  int max_bytes = 1;
  for (int t : grp.inputs)
    if (probe.is_dense(t)) {
      dense_in.push_back(t);
      max_bytes = std::max<int>(max_bytes, dtype_size(g.tensor(t).desc.dtype));
    }
  for (int t : grp.outputs) {
    if (probe.is_dense(t)) {
      dense_out.push_back(t);
      max_bytes = std::max<int>(max_bytes, dtype_size(g.tensor(t).desc.dtype));
    } else {
      other_out.push_back(t);
    }
  }
  PointwiseSchedule sch = choose_pointwise(max_bytes, cx.opts.sm);
  const int V = sch.vec, T = sch.threads;

  Dim numel = shape_numel(iter);
  bool small = numel.is_static() && numel.value() + V * T < (int64_t{1} << 31);
  const char* idx = small ? "int" : "long long";
  std::string name = group_kernel_name(g, grp, "");

  Writer w;
  auto emit_element = [&](const std::string& lin, const std::string& suffix,
                          const std::map<std::string, std::string>& preloaded) {
    ElementLoader ld{g, iter, tensor_strides(out0), lin, {}, &dp, suffix, preloaded};
    ld.coords = decompose(lin, iter, ld.dense, dp);
    PointwiseEmitter pe{g, ld.fn(), {}, suffix};
    pe.emit(w, grp.nodes);
    return pe.values;
  };
  auto identity_key = [&](int t) {
    std::string k = fmt::format("{}", t);
    for (size_t i = 0; i < iter.size(); ++i) k += fmt::format(",{}", i);
    return k;
  };
  auto store_other = [&](const std::map<int, std::string>& vals, const std::string& lin) {
    if (other_out.empty()) return;
    std::vector<std::string> coords = decompose(lin, iter, tensor_strides(out0), dp);
    for (int t : other_out) {
      std::vector<int> map(iter.size());
      for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<int>(i);
      w.line("{};", store_f32(fmt::format("{} + {}", tensor_param(t),
                                          operand_offset(g.tensor(t).desc, map, coords, dp)),
                              vals.at(t)));
    }
  };

  w.line("// group {}: {}", grp.id, grp.name);
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  w.line("const {0} n = {1};", idx, dp.ref(numel));
  w.line("const {0} base = (static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x) * {2};", idx, T, V);
  w.line("if (base >= n) return;");
  if (V > 1) {
    w.open("if (base + {} <= n) {{", V);
    std::map<std::string, std::string> pre;
    for (int t : dense_in) {
      DType dt = g.tensor(t).desc.dtype;
      w.line("float a{}[{}];", t, V);
      if (vec_elems(dt) == V) {
        w.line("kiln_ldv({} + base, a{});", tensor_param(t), t);
      } else {
        for (int j = 0; j < V; ++j)
          w.line("a{0}[{1}] = kiln_ld({2} + base + {1});", t, j, tensor_param(t));
      }
    }
    std::vector<std::map<int, std::string>> lanes;
    for (int j = 0; j < V; ++j) {
      std::map<std::string, std::string> lane_pre;
      for (int t : dense_in) lane_pre[identity_key(t)] = fmt::format("a{}[{}]", t, j);
      w.line("// lane {}", j);
      lanes.push_back(emit_element(fmt::format("(base + {})", j), fmt::format("_{}", j), lane_pre));
      store_other(lanes.back(), fmt::format("(base + {})", j));
    }
    for (int t : dense_out) {
      DType dt = g.tensor(t).desc.dtype;
      std::string vals;
      for (int j = 0; j < V; ++j) vals += (j ? ", " : "") + lanes[j].at(t);
      if (vec_elems(dt) == V) {
        w.line("const float o{}[{}] = {{{}}};", t, V, vals);
        w.line("kiln_stv({} + base, o{});", tensor_param(t), t);
      } else {
        for (int j = 0; j < V; ++j)
          w.line("{};",
                 store_f32(fmt::format("{} + base + {}", tensor_param(t), j), lanes[j].at(t)));
      }
    }
    w.line("return;");
    w.close();
  }
  // Scalar path: the last partial vector (or every element when V == 1).
  w.open("for (int j = 0; j < {}; ++j) {{", V);
  w.line("const {} i = base + j;", idx);
  w.line("if (i >= n) break;");
  auto vals = emit_element("i", "", {});
  for (int t : dense_out) w.line("{};", store_f32(tensor_param(t) + " + i", vals.at(t)));
  store_other(vals, "i");
  w.close();
  w.close();

  KernelSpec k;
  k.name = name;
  k.entry = name;
  std::string body = w.take();
  size_t at = body.find("KILN_PARAMS");
  body.replace(at, 11, gp.signature());
  k.source = kernel_source(body);
  k.args = gp.args();
  k.block = {T, 1, 1};
  k.grid = {(numel + Dim(int64_t{V} * T - 1)) / Dim(int64_t{V} * T), Dim(1), Dim(1)};
  k.bytes_moved = group_bytes_moved(g, grp);
  k.flops = group_flops(g, grp);
  return k;
}

}  // namespace kiln
