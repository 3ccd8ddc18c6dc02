// Reduction groups: reduce_sum/mean/max/min over any axes (keepdims or not), and global_avgpool
// (a mean over the spatial dims), with an elementwise prologue on the input and an epilogue on
// the reduced output.
//
// Schedule: when the innermost memory dim of the input is reduced, a warp (short reductions) or
// a CTA (long ones) per output element walks the reduced elements in memory order (coalesced);
// otherwise one thread per output element loops over the reduced dims while adjacent threads read
// adjacent addresses. Each input element is visited exactly once, so prologue intermediates
// needed elsewhere are written on the way.
#include <algorithm>
#include <numeric>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {

KernelSpec emit_reduction(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.anchor >= 0, "reduction group {} without anchor", grp.id);
  const Node& A = g.nodes()[grp.anchor];
  const int in_t = A.inputs[0], out_t = A.outputs[0];
  const TensorDesc& xd = g.tensor(in_t).desc;
  const TensorDesc& od = g.tensor(out_t).desc;
  const Shape X = xd.shape;
  const int r = static_cast<int>(X.size());

  std::vector<bool> reduced(r, false);
  bool keep = true;
  enum { Sum, Mean, Max, Min } kind = Sum;
  if (A.op == OpKind::GlobalAvgpool) {
    for (int d = 2; d < r; ++d) reduced[d] = true;
    kind = Mean;
  } else {
    const auto& axes = A.attr_ints("axes");
    for (int64_t a : axes) reduced[a < 0 ? a + r : a] = true;
    if (axes.empty()) reduced.assign(r, true);
    keep = A.attr_int("keepdims") != 0;
    kind = A.op == OpKind::ReduceSum    ? Sum
           : A.op == OpKind::ReduceMean ? Mean
           : A.op == OpKind::ReduceMax  ? Max
                                        : Min;
  }
  // Dims in the input's memory order (outermost first).
  Shape xs = tensor_strides(xd);
  std::vector<int> order(r);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (xs[a].is_static() && xs[b].is_static()) return xs[a].value() > xs[b].value();
    return false;
  });
  bool static_strides = true;
  for (const Dim& d : xs) static_strides &= d.is_static();
  if (!static_strides) std::iota(order.begin(), order.end(), 0);  // logical order
  std::vector<int> red_dims, kept_dims;
  for (int d : order) (reduced[d] ? red_dims : kept_dims).push_back(d);
  Shape red_shape, kept_shape;
  for (int d : red_dims) red_shape.push_back(X[d]);
  for (int d : kept_dims) kept_shape.push_back(X[d]);
  Dim R = shape_numel(red_shape), nout = shape_numel(kept_shape);
  bool inner = !red_dims.empty() && red_dims.back() == order.back();
  ReduceSchedule sch = choose_reduction(R.is_static() ? R.value() : -1, inner, cx.opts.sm);

  std::vector<int> prologue, epilogue;
  for (int n : grp.nodes)
    if (n != grp.anchor) (n < grp.anchor ? prologue : epilogue).push_back(n);
  auto is_out = [&](int t) {
    return std::find(grp.outputs.begin(), grp.outputs.end(), t) != grp.outputs.end();
  };

  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  std::string name = group_kernel_name(
      g, grp, fmt::format("r{}", R.is_static() ? std::to_string(R.value()) : "dyn"));
  const std::string Rr = dp.ref(R);
  const char* init = kind == Max ? "-KILN_INF" : kind == Min ? "KILN_INF" : "0.0f";
  auto combine = [&](const std::string& v) {
    return kind == Max   ? fmt::format("acc = fmaxf(acc, {});", v)
           : kind == Min ? fmt::format("acc = fminf(acc, {});", v)
                         : fmt::format("acc += {};", v);
  };
  const char* opn = kind == Max ? "max" : kind == Min ? "min" : "sum";

  Writer w;
  std::vector<std::string> kept_c = decompose("o", kept_shape, row_major_strides(kept_shape), dp);
  // Visits input element j of output o: prologue, extra outputs, accumulate.
  auto visit = [&]() {
    std::vector<std::string> c(r, "0");
    auto rc = decompose("j", red_shape, row_major_strides(red_shape), dp);
    for (size_t k = 0; k < kept_dims.size(); ++k) c[kept_dims[k]] = kept_c[k];
    for (size_t k = 0; k < red_dims.size(); ++k) c[red_dims[k]] = rc[k];
    ElementLoader ld{g, X, Shape{}, "", c, &dp, "", {}};
    PointwiseEmitter pe{g, ld.fn(), {}, ""};
    pe.emit(w, prologue);
    std::vector<int> ident(r);
    std::iota(ident.begin(), ident.end(), 0);
    std::string v = pe.values.count(in_t)
                        ? pe.values.at(in_t)
                        : load_f32(tensor_param(in_t) + " + " + ld.offset(in_t, ident));
    for (int n : prologue) {
      int t = g.nodes()[n].outputs[0];
      if (is_out(t))
        w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    }
    w.line("{}", combine(v));
  };
  // Finishes output o from the reduced `acc`.
  auto finish = [&]() {
    w.line("const float red = {};",
           kind == Mean ? fmt::format("acc / static_cast<float>({})", Rr) : std::string("acc"));
    std::vector<std::string> oc;
    if (keep) {
      oc.assign(r, "0");
      for (size_t k = 0; k < kept_dims.size(); ++k) oc[kept_dims[k]] = kept_c[k];
    } else {
      // Output dims are the kept dims in logical order.
      std::vector<int> logical = kept_dims;
      std::sort(logical.begin(), logical.end());
      for (int d : logical)
        for (size_t k = 0; k < kept_dims.size(); ++k)
          if (kept_dims[k] == d) oc.push_back(kept_c[k]);
    }
    ElementLoader ld{g, od.shape, Shape{}, "", oc, &dp, "", {}};
    PointwiseEmitter pe{g, ld.fn(), {{out_t, "red"}}, ""};
    pe.emit(w, epilogue);
    std::vector<int> ident(od.shape.size());
    std::iota(ident.begin(), ident.end(), 0);
    for (int t : grp.outputs) {
      bool pro = false;
      for (int n : prologue) pro |= g.nodes()[n].outputs[0] == t;
      if (pro) continue;
      w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    }
  };

  const int T = sch.threads;
  w.line("// group {}: {} of {} over {} elements per output", grp.id, op_name(A.op), xd.str(),
         R.str());
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  Dim grid;
  if (!sch.inner) {
    w.line("const long long o = static_cast<long long>(blockIdx.x) * {} + threadIdx.x;", T);
    w.line("if (o >= {}) return;", dp.ref(nout));
    w.line("(void)o;");
    w.line("float acc = {};", init);
    w.open("for (long long j = 0; j < {}; ++j) {{", Rr);
    visit();
    w.close();
    finish();
    grid = (nout + Dim(T - 1)) / Dim(T);
  } else if (sch.warp_per_output) {
    w.line("const long long o = static_cast<long long>(blockIdx.x) * {} + (threadIdx.x >> 5);",
           sch.outputs_per_cta);
    w.line("if (o >= {}) return;", dp.ref(nout));
    w.line("(void)o;");
    w.line("const int lane = threadIdx.x & 31;");
    w.line("float acc = {};", init);
    w.open("for (long long j = lane; j < {}; j += 32) {{", Rr);
    visit();
    w.close();
    w.line("acc = kiln_warp_{}(acc);", opn);
    w.open("if (lane == 0) {{");
    finish();
    w.close();
    grid = (nout + Dim(sch.outputs_per_cta - 1)) / Dim(sch.outputs_per_cta);
  } else {
    w.line("__shared__ float kiln_red[33];");
    w.line("const long long o = blockIdx.x;");
    w.line("(void)o;");
    w.line("float acc = {};", init);
    w.open("for (long long j = threadIdx.x; j < {}; j += {}) {{", Rr, T);
    visit();
    w.close();
    w.line("acc = kiln_block_{}<{}>(acc, kiln_red);", opn, T);
    w.open("if (threadIdx.x == 0) {{");
    finish();
    w.close();
    grid = nout;
  }
  w.close();

  return group_kernel_spec(name, w, gp, T, grid);
}

}  // namespace kiln
