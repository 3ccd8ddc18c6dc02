// A conv's A prologue (Problem::prologue): the elementwise chain that makes the conv's input from
// the tensor the loaders read (a squeeze-excite channel scale, DenseNet's BN + ReLU before its
// 1x1 convs), applied to A in shared memory, so that the chain's result never goes to memory.
// Each thread rewrites the 16-byte chunks it copied for a k tile once they have landed (the
// mainloop calls xform_a before its barrier): 8 channels of one output pixel's filter tap,
// computed in f32 and rounded to A's type once. Chunks the loader zero-filled (padding taps, rows
// past M, k past K) stay zero: the chain need not map zero to zero. The chain's other operands
// vary only along the sample and the channel (the planner's rule), read through their strides.
#include "codegen/contraction/tensor_core.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

// The value of operand `slot` of prologue node `n` at (img, ch): its strides over the dims it
// does not broadcast along.
std::string operand_value(TcKernel& k, const Node& n, int slot, const Shape& iter) {
  const Graph& g = *k.p.graph;
  const int t = n.inputs[slot];
  const TensorDesc& td = g.tensor(t).desc;
  const std::vector<int> map = operand_dim_map(g, n, slot, iter);
  const std::vector<std::string> st = stride_code(k.a, td);
  const char* coords[] = {"img", "ch"};
  std::string off;
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    const Dim& d = td.shape[map[i]];
    if (d.is_static() && d.value() == 1) continue;
    KILN_ASSERT(i < 2, "{}: prologue operand '{}' varies along a spatial dim", k.p.where,
                g.tensor(t).name);
    off += fmt::format("{}{} * {}", off.empty() ? "" : " + ", coords[i], st[map[i]]);
  }
  return fmt::format("{}({} + {})", load_fn(td.dtype), k.a.tensor(g, t, true),
                     off.empty() ? "0" : off);
}

}  // namespace

void emit_a_prologue(TcKernel& k, const std::string& tid, int passes, int cpr, const std::string& h,
                     const std::string& wdim) {
  Writer& b = k.body;
  const Graph& g = *k.p.graph;
  const ConvProblem& c = k.p.conv;
  const Shape& iter = g.tensor(k.p.x).desc.shape;
  const char* dt = dtype_name(k.p.dtype);
  b.open("auto xform_a = [&](unsigned short* s, int kt) {{");
  b.line("#pragma unroll");
  b.open("for (int p = 0; p < {}; ++p) {{", passes);
  // The chunk load_a copied in this pass, and its predicate.
  b.line("const int id = {} + p * {};", tid, k.L.loader_threads);
  b.line("const int lm = id / {}, lk = (id % {}) * 8;", cpr, cpr);
  b.line("const int k = kt * {} + lk;", k.L.cfg.bk);
  b.line("const int rs = k / {}, cc = k - rs * {};", c.c, c.c);
  b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
  b.line("const int ih = a_ih[p] + r * {}, iw = a_iw[p] + sx * {};", c.dil_h, c.dil_w);
  b.line("if (!(k < {} && ih >= 0 && ih < {} && iw >= 0 && iw < {})) continue;", k.v.kred, h, wdim);
  b.line("const unsigned addr = kc_smem_u32(s + G::a_off(lm, lk));");
  b.line("const uint4 xin = kc_ld_shared_v4(addr);");
  b.line("const long long img = a_img[p];");
  b.line("float y[8];");
  b.line("#pragma unroll");
  b.open("for (int j = 0; j < 8; ++j) {{");
  b.line("const long long ch = cc + j;");
  b.line("const float x = kc_{}_of_x8(xin, j);", dt);
  PointwiseEmitter pe{
      g,
      [&](Writer&, int node, int slot) { return operand_value(k, g.nodes()[node], slot, iter); },
      {{k.p.x, "x"}},
      ""};
  pe.emit(b, k.p.prologue);
  b.line("y[j] = {};", pe.values.at(k.p.anchor->inputs[0]));
  b.close();
  b.line(
      "kc_st_shared_v4(addr, kc_pack_{0}(y[0], y[1]), kc_pack_{0}(y[2], y[3]), "
      "kc_pack_{0}(y[4], y[5]), kc_pack_{0}(y[6], y[7]));",
      dt);
  b.close();
  b.close("};");
}

}  // namespace kiln::contraction
