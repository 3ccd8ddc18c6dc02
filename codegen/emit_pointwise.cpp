// Pointwise groups: an elementwise DAG (broadcast operands allowed) over one iteration shape,
// possibly with several outputs. Each thread handles U 16-byte vectors of the widest densely
// indexed tensor (dense = same shape and strides as the first output: read/written by linear
// index), the U vectors a CTA-width apart so every warp access is 512 contiguous bytes; all
// loads are issued before any math. Broadcast operands contiguous along the innermost dim (a
// bias) are loaded as vectors too; others are indexed through their own strides from the
// element's coordinates. Dense tensors are single-use: streaming loads (no L1 allocation) and
// evict-first stores; broadcast operands keep the cached loads. The last partial CTA chunk takes a
// scalar path (omitted when the static element count is a multiple of the chunk), so any size and
// alignment of the element count works; the grid covers the tensor once (no grid-stride loop).
// Index math is 32-bit when the static element count allows it.
#include <algorithm>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
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
  PointwiseSchedule sch = choose_pointwise(max_bytes, cx.opts.sm, cx.opts.schedule);
  const int V = sch.vec, T = sch.threads, U = sch.vecs;
  const char* ld_fn = sch.stream_hints ? "kiln_ldv_stream" : "kiln_ldv_plain";
  const char* st_fn = sch.stream_hints ? "kiln_stv_stream" : "kiln_stv";
  const int64_t chunk = int64_t{V} * T * U;  // elements per CTA

  Dim numel = shape_numel(iter);
  bool small = numel.is_static() && numel.value() + chunk < (int64_t{1} << 31);
  const char* idx = small ? "int" : "long long";
  std::string name = group_kernel_name(g, grp, "");
  const Shape dense = tensor_strides(out0);

  Writer w;
  auto emit_element = [&](const std::string& lin, const std::string& suffix,
                          const std::map<std::string, std::string>& preloaded) {
    ElementLoader ld{g, iter, dense, lin, {}, &dp, suffix, preloaded};
    ld.coords = decompose(lin, iter, ld.dense, dp);
    PointwiseEmitter pe{g, ld.fn(), {}, suffix};
    pe.emit(w, grp.nodes);
    return pe.values;
  };
  auto map_key = [&](int t, const std::vector<int>& map) {
    std::string k = fmt::format("{}", t);
    for (int m : map) k += fmt::format(",{}", m);
    return k;
  };
  std::vector<int> identity(iter.size());
  for (size_t i = 0; i < iter.size(); ++i) identity[i] = static_cast<int>(i);
  auto store_other = [&](const std::map<int, std::string>& vals, const std::string& lin) {
    if (other_out.empty()) return;
    std::vector<std::string> coords = decompose(lin, iter, dense, dp);
    for (int t : other_out)
      w.line("{};", store_f32(fmt::format("{} + {}", tensor_param(t),
                                          operand_offset(g.tensor(t).desc, identity, coords, dp)),
                              vals.at(t)));
  };

  // Broadcast operands that are contiguous along the innermost memory dim of the iteration
  // (a bias over the last dim, a per-channel parameter in NHWC): within one V-aligned vector only
  // that coordinate moves, so the V values are V consecutive elements (one 16-byte load).
  struct BcastVec {
    int t;
    std::vector<int> map;
    std::string key;
  };
  std::vector<BcastVec> bvec;
  int d_in = -1;
  for (size_t i = 0; i < iter.size(); ++i)
    if (dense[i].is_static() && dense[i].value() == 1 && iter[i].is_static() && iter[i].value() > 1)
      d_in = static_cast<int>(i);
  if (V > 1 && d_in >= 0 && iter[d_in].value() % V == 0)
    for (int n : grp.nodes) {
      const Node& node = g.nodes()[n];
      for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
        int t = node.inputs[slot];
        if (std::find(grp.inputs.begin(), grp.inputs.end(), t) == grp.inputs.end()) continue;
        if (probe.is_dense(t)) continue;
        std::vector<int> map = operand_dim_map(g, node, static_cast<int>(slot), iter);
        const TensorDesc& d = g.tensor(t).desc;
        Shape st = tensor_strides(d);
        int od = map[d_in];
        bool ok = od >= 0 && st[od].is_static() && st[od].value() == 1 && d.shape[od].is_static() &&
                  d.shape[od].value() == iter[d_in].value();
        for (size_t i = 0; ok && i < map.size(); ++i) {
          if (static_cast<int>(i) == d_in || map[i] < 0) continue;
          const Dim& sz = d.shape[map[i]];
          if (sz.is_static() && sz.value() == 1) continue;
          ok = st[map[i]].is_static() && st[map[i]].value() % V == 0;
        }
        std::string key = map_key(t, map);
        bool seen = false;
        for (const auto& b : bvec) seen |= b.key == key;
        if (ok && !seen) bvec.push_back({t, map, key});
      }
    }

  const bool exact = numel.is_static() && numel.value() % chunk == 0;
  w.line("// group {}: {}", grp.id, grp.name);
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  w.line("const {0} n = {1};", idx, dp.ref(numel));
  w.line("(void)n;");
  w.line("const {0} blk = static_cast<{0}>(blockIdx.x) * {1};", idx, chunk);
  if (V > 1) {
    // Full CTA chunk: U vectors per thread, every load issued before any math.
    if (!exact) w.open("if (blk + {} <= n) {{", chunk);
    if (exact) w.open("{{");
    for (int u = 0; u < U; ++u)
      w.line("const {} base{} = blk + {} + threadIdx.x * {};", idx, u, int64_t{u} * T * V, V);
    for (int u = 0; u < U; ++u) {
      std::string base = fmt::format("base{}", u);
      for (int t : dense_in) {
        DType dt = g.tensor(t).desc.dtype;
        w.line("float a{}_{}[{}];", t, u, V);
        if (vec_elems(dt) == V) {
          w.line("{}({} + {}, a{}_{});", ld_fn, tensor_param(t), base, t, u);
        } else {
          for (int j = 0; j < V; ++j)
            w.line("a{0}_{1}[{2}] = kiln_ld({3} + {4} + {2});", t, u, j, tensor_param(t), base);
        }
      }
      if (!bvec.empty()) {
        std::vector<std::string> coords = decompose(base, iter, dense, dp);
        for (size_t b = 0; b < bvec.size(); ++b) {
          const BcastVec& bv = bvec[b];
          std::string ptr = fmt::format("{} + {}", tensor_param(bv.t),
                                        operand_offset(g.tensor(bv.t).desc, bv.map, coords, dp));
          w.line("float b{}_{}[{}];", b, u, V);
          if (vec_elems(g.tensor(bv.t).desc.dtype) == V)
            w.line("kiln_ldv({}, b{}_{});", ptr, b, u);
          else
            for (int j = 0; j < V; ++j) w.line("b{0}_{1}[{2}] = kiln_ld({3} + {2});", b, u, j, ptr);
        }
      }
    }
    for (int u = 0; u < U; ++u) {
      std::vector<std::map<int, std::string>> lanes;
      for (int j = 0; j < V; ++j) {
        std::map<std::string, std::string> lane_pre;
        for (int t : dense_in) lane_pre[map_key(t, identity)] = fmt::format("a{}_{}[{}]", t, u, j);
        for (size_t b = 0; b < bvec.size(); ++b)
          lane_pre[bvec[b].key] = fmt::format("b{}_{}[{}]", b, u, j);
        w.line("// vector {} lane {}", u, j);
        std::string lin = fmt::format("(base{} + {})", u, j);
        lanes.push_back(emit_element(lin, fmt::format("_{}_{}", u, j), lane_pre));
        store_other(lanes.back(), lin);
      }
      for (int t : dense_out) {
        DType dt = g.tensor(t).desc.dtype;
        std::string vals;
        for (int j = 0; j < V; ++j) vals += (j ? ", " : "") + lanes[j].at(t);
        if (vec_elems(dt) == V) {
          w.line("const float o{}_{}[{}] = {{{}}};", t, u, V, vals);
          w.line("{}({} + base{}, o{}_{});", st_fn, tensor_param(t), u, t, u);
        } else {
          for (int j = 0; j < V; ++j)
            w.line("{};", store_f32(fmt::format("{} + base{} + {}", tensor_param(t), u, j),
                                    lanes[j].at(t)));
        }
      }
    }
    if (!exact) w.line("return;");
    w.close();
  }
  if (!exact || V == 1) {
    // Scalar path: the last partial CTA chunk (or every element when V == 1).
    w.open("for (int u = 0; u < {}; ++u) {{", U);
    w.line("const {} base = blk + u * {} + threadIdx.x * {};", idx, T * V, V);
    w.open("for (int j = 0; j < {}; ++j) {{", V);
    w.line("const {} i = base + j;", idx);
    w.line("if (i >= n) break;");
    auto vals = emit_element("i", "", {});
    for (int t : dense_out) w.line("{};", store_f32(tensor_param(t) + " + i", vals.at(t)));
    store_other(vals, "i");
    w.close();
    w.close();
  }
  w.close();

  return group_kernel_spec(name, w, gp, T, (numel + Dim(chunk - 1)) / Dim(chunk));
}

}  // namespace kiln
