// ChannelNorm groups: groupnorm / instancenorm (statistics per (n, group) over the group's
// channels and all spatial positions), NCHW or NHWC, with an elementwise prologue and epilogue.
//
// Schedule: one CTA per (n, group). Pass 1 accumulates shifted sums (x - x0) and (x - x0)^2 (x0 =
// the group's first element, which keeps the variance free of cancellation for data with a large
// mean) and reduces them over the CTA; pass 2 re-reads the group, normalizes, applies the
// per-channel affine and the epilogue, and stores. A group is at most a few hundred KB and the CTAs
// resident at once cover far less than the 50-60 MB L2 of an H100/H200, so the second read is
// served from L2: DRAM sees the input once. Elements are walked in memory order (NHWC: the
// group's channels of one pixel, then the next pixel; NCHW: one contiguous block), so adjacent
// threads touch adjacent addresses.
#include <algorithm>
#include <numeric>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/check.hpp"
#include "engine/op_table.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {

KernelSpec emit_channelnorm(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.anchor >= 0, "channelnorm group {} without anchor", grp.id);
  const Node& A = g.nodes()[grp.anchor];
  const int in_t = A.inputs[0], out_t = A.outputs[0];
  const TensorDesc& xd = g.tensor(in_t).desc;
  const Shape X = xd.shape;
  const int r = static_cast<int>(X.size());
  const int64_t C = X[1].value();
  const int64_t G = A.op == OpKind::Groupnorm ? A.attr_int("groups") : C;
  const int64_t Cg = C / G;
  Shape spatial(X.begin() + 2, X.end());
  Dim S = shape_numel(spatial);
  Dim M = S * Dim(Cg);
  // Channel innermost in memory (NHWC) or not.
  Shape xs = tensor_strides(xd);
  const bool channels_last = xs[1].is_static() && xs[1].value() == 1 && r > 2;

  std::vector<int> prologue, epilogue;
  for (int n : grp.nodes)
    if (n != grp.anchor) (n < grp.anchor ? prologue : epilogue).push_back(n);
  auto is_out = [&](int t) {
    return std::find(grp.outputs.begin(), grp.outputs.end(), t) != grp.outputs.end();
  };
  auto from_prologue = [&](int t) {
    for (int n : prologue)
      if (g.nodes()[n].outputs[0] == t) return true;
    return false;
  };

  ChannelNormSchedule sch =
      choose_channelnorm(M.is_static() ? M.value() : -1, false, 1, cx.opts.sm);
  const int T = sch.threads;
  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  const std::string Mr = dp.ref(M), Sr = dp.ref(S);
  std::string name = group_kernel_name(g, grp, fmt::format("g{}", G));
  // 32-bit element index within the group when it fits: the coordinate div/mod by static
  // channel and spatial sizes become a multiply-high each instead of a 64-bit division sequence.
  const char* eidx = M.is_static() && M.value() < (int64_t{1} << 31) ? "int" : "long long";

  Writer w;
  std::vector<int> ident(r);
  std::iota(ident.begin(), ident.end(), 0);
  // Coordinates of group element e.
  auto coords = [&](const std::string& e) {
    std::vector<std::string> c(r, "0");
    c[0] = "n";
    std::string cl, sidx;
    if (Cg == 1) {
      cl = "0";
      sidx = e;
    } else if (channels_last) {
      cl = fmt::format("({} % {})", e, Cg);
      sidx = fmt::format("({} / {})", e, Cg);
    } else {
      cl = fmt::format("({} / {})", e, Sr);
      sidx = fmt::format("({} % {})", e, Sr);
    }
    c[1] = fmt::format("(grp * {} + {})", Cg, cl);
    auto sc = decompose(sidx, spatial, row_major_strides(spatial), dp);
    for (size_t k = 0; k < sc.size(); ++k) c[2 + k] = sc[k];
    return c;
  };
  // Prologue for element e; returns the anchor input value.
  std::map<int, std::string> pro_vals;  // the last emitted prologue's values
  auto element = [&](ElementLoader& ld, bool store) {
    PointwiseEmitter pe{g, ld.fn(), {}, ""};
    pe.emit(w, prologue);
    pro_vals = pe.values;
    std::string v = pe.values.count(in_t)
                        ? pe.values.at(in_t)
                        : load_f32(tensor_param(in_t) + " + " + ld.offset(in_t, ident));
    if (store)
      for (int n : prologue) {
        int t = g.nodes()[n].outputs[0];
        if (is_out(t))
          w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
      }
    return v;
  };

  w.line("// group {}: {} ({} groups of {} channels) over {}", grp.id, op_name(A.op), G, Cg,
         xd.str());
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  w.line("__shared__ float kiln_red[33];");
  w.line("const long long n = blockIdx.x / {};", G);
  w.line("const int grp = blockIdx.x % {};", G);
  w.line("float shift;");
  w.open("{{");
  {
    w.line("const {} e = 0;", eidx);
    ElementLoader ld{g, X, Shape{}, "", coords("e"), &dp, "", {}};
    w.line("shift = {};", element(ld, false));
  }
  w.close();
  w.line("float s1 = 0.0f, s2 = 0.0f;");
  // Unrolled so that several independent loads are in flight per thread.
  w.line("#pragma unroll 4");
  w.open("for ({} e = threadIdx.x; e < {}; e += {}) {{", eidx, Mr, T);
  {
    ElementLoader ld{g, X, Shape{}, "", coords("e"), &dp, "", {}};
    w.line("const float d = {} - shift;", element(ld, false));
    w.line("s1 += d;");
    w.line("s2 += d * d;");
  }
  w.close();
  w.line("s1 = kiln_block_sum<{}>(s1, kiln_red);", T);
  w.line("s2 = kiln_block_sum<{}>(s2, kiln_red);", T);
  w.line("const float inv_m = 1.0f / static_cast<float>({});", Mr);
  w.line("const float dm = s1 * inv_m;");
  w.line("const float mean = shift + dm;");
  w.line("const float rstd = rsqrtf(fmaxf(s2 * inv_m - dm * dm, 0.0f) + {});",
         cuda_float(A.attr_float("eps")));
  w.line("#pragma unroll 4");
  w.open("for ({} e = threadIdx.x; e < {}; e += {}) {{", eidx, Mr, T);
  {
    ElementLoader ld{g, X, Shape{}, "", coords("e"), &dp, "", {}};
    std::string v = element(ld, true);
    std::string y = fmt::format("({} - mean) * rstd", v);
    auto param = [&](size_t slot) {
      int t = A.inputs[slot];
      std::vector<int> map(r, -1);
      map[1] = 0;
      return load_f32(tensor_param(t) + " + " +
                      operand_offset(g.tensor(t).desc, map, ld.coords, dp));
    };
    if (A.inputs.size() > 1) y = fmt::format("{} * {}", y, param(1));
    if (A.inputs.size() > 2) y = fmt::format("{} + {}", y, param(2));
    w.line("const float y = {};", y);
    std::map<int, std::string> seed = pro_vals;
    seed[out_t] = "y";
    PointwiseEmitter pe{g, ld.fn(), seed, ""};
    pe.emit(w, epilogue);
    for (int t : grp.outputs)
      if (!from_prologue(t))
        w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
  }
  w.close();
  w.close();

  KernelSpec k;
  k.name = name;
  k.entry = name;
  std::string body = w.take();
  body.replace(body.find("KILN_PARAMS"), 11, gp.signature());
  k.source = kernel_source(body);
  k.args = gp.args();
  k.block = {T, 1, 1};
  k.grid = {X[0] * Dim(G), Dim(1), Dim(1)};
  k.bytes_moved = group_bytes_moved(g, grp);
  k.flops = group_flops(g, grp);
  return k;
}

}  // namespace kiln
