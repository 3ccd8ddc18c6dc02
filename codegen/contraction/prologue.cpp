// A conv's A prologue (Problem::prologue): the elementwise chain that makes the conv's input from
// the tensor the loaders read (a squeeze-excite channel scale, DenseNet's BN + ReLU before its
// 1x1 convs), applied to A in shared memory, so that the chain's result never goes to memory.
// Each thread rewrites the 16-byte chunks it copied for a k tile once they have landed (the
// mainloop calls xform_a before its barrier): 8 channels of one output pixel's filter tap,
// computed in f32 and rounded to A's type once. Chunks the loader zero-filled (padding taps, rows
// past M, k past K) stay zero: the chain need not map zero to zero. The chain's other operands
// vary only along the sample and the channel (the planner's rule), read through their strides.
#include <cctype>
#include <map>
#include <utility>

#include "codegen/contraction/tensor_core.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

// A literal stride ("32LL") that is a multiple of 8 elements.
bool multiple_of_8(const std::string& stride) {
  if (stride.size() < 3 || stride.compare(stride.size() - 2, 2, "LL") != 0) return false;
  for (size_t i = 0; i + 2 < stride.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(stride[i]))) return false;
  return std::stoll(stride.substr(0, stride.size() - 2)) % 8 == 0;
}

// How one operand of a prologue node is read for the chunk's 8 channels cc .. cc + 7 of sample
// img: `pre` (statements before the channel loop, or empty) and its value at channel cc + j.
// A per-channel operand (no sample term) is read once per k tile, before the thread's passes
// (every pass of a thread has the same channels); a 16-bit one with unit channel stride as one
// 16-byte load.
struct OperandRead {
  bool per_channel = true;
  std::string pre, value;
};

OperandRead operand_read(TcKernel& k, const Node& n, int slot, const Shape& iter) {
  const Graph& g = *k.p.graph;
  const int t = n.inputs[slot];
  const TensorDesc& td = g.tensor(t).desc;
  const std::vector<int> map = operand_dim_map(g, n, slot, iter);
  const std::vector<std::string> st = stride_code(k.a, td);
  std::string img_stride, ch_stride;
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    const Dim& d = td.shape[map[i]];
    if (d.is_static() && d.value() == 1) continue;
    KILN_ASSERT(i < 2, "{}: prologue operand '{}' varies along a spatial dim", k.p.where,
                g.tensor(t).name);
    (i == 0 ? img_stride : ch_stride) = st[map[i]];
  }
  OperandRead r;
  r.per_channel = img_stride.empty();
  const std::string ptr = k.a.tensor(g, t, true);
  const std::string img = img_stride.empty() ? "" : fmt::format("img * {} + ", img_stride);
  const bool vec = td.dtype != DType::F32 && td.layout != Layout::Strided && ch_stride == "1LL" &&
                   (img_stride.empty() || multiple_of_8(img_stride));
  const std::string var = fmt::format("o{}", t);
  if (vec) {
    r.pre = fmt::format("const uint4 {} = kc_ld_x8({} + {}cc);", var, ptr, img);
    r.value = fmt::format("kc_{}_of_x8({}, j)", dtype_name(td.dtype), var);
  } else if (r.per_channel) {  // scalars, loaded once per k tile into registers
    r.pre = fmt::format("float {}[8]; for (int j = 0; j < 8; ++j) {}[j] = {}({} + {});", var, var,
                        load_fn(td.dtype), ptr,
                        ch_stride.empty() ? "0" : fmt::format("(cc + j) * {}", ch_stride));
    r.value = fmt::format("{}[j]", var);
  } else {
    r.value = fmt::format("{}({} + {}{})", load_fn(td.dtype), ptr, img,
                          ch_stride.empty() ? "0" : fmt::format("(cc + j) * {}", ch_stride));
  }
  return r;
}

}  // namespace

void emit_a_prologue(TcKernel& k, const std::string& tid, int passes, int cpr, const std::string& h,
                     const std::string& wdim) {
  Writer& b = k.body;
  const Graph& g = *k.p.graph;
  const ConvProblem& c = k.p.conv;
  const Shape& iter = g.tensor(k.p.x).desc.shape;
  const char* dt = dtype_name(k.p.dtype);
  // Every pass of a thread copies the same 8 k of its rows (the loader threads are a multiple
  // of the chunks per row).
  KILN_ASSERT(k.L.loader_threads % cpr == 0, "{}: the passes' chunks change k", k.p.where);
  std::map<std::pair<int, int>, OperandRead> reads;
  for (int ni : k.p.prologue) {
    const Node& n = g.nodes()[ni];
    for (size_t slot = 0; slot < n.inputs.size(); ++slot)
      if (g.tensor(n.inputs[slot]).desc.shape != iter)
        reads[{ni, static_cast<int>(slot)}] = operand_read(k, n, static_cast<int>(slot), iter);
  }
  b.open("auto xform_a = [&](unsigned short* s, int kt) {{");
  // The thread's chunk of k (the filter tap and its channels), and the per-channel operands.
  b.line("const int lk = ({} % {}) * 8;", tid, cpr);
  b.line("const int k = kt * {} + lk;", k.L.cfg.bk);
  b.line("if (k >= {}) return;", k.v.kred);
  b.line("const int rs = k / {}, cc = k - rs * {};", c.c, c.c);
  b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
  for (const auto& [key, rd] : reads)
    if (rd.per_channel && !rd.pre.empty()) b.line("{}", rd.pre);
  b.line("#pragma unroll");
  b.open("for (int p = 0; p < {}; ++p) {{", passes);
  // The chunk load_a copied in this pass: taps in the padding and rows past M stay zero.
  b.line("const int lm = ({} + p * {}) / {};", tid, k.L.loader_threads, cpr);
  b.line("const int ih = a_ih[p] + r * {}, iw = a_iw[p] + sx * {};", c.dil_h, c.dil_w);
  b.line("if (!(ih >= 0 && ih < {} && iw >= 0 && iw < {})) continue;", h, wdim);
  b.line("const unsigned addr = kc_smem_u32(s + G::a_off(lm, lk));");
  b.line("const uint4 xin = kc_ld_shared_v4(addr);");
  b.line("const long long img = a_img[p];");
  for (const auto& [key, rd] : reads)
    if (!rd.per_channel && !rd.pre.empty()) b.line("{}", rd.pre);
  b.line("float y[8];");
  b.line("#pragma unroll");
  b.open("for (int j = 0; j < 8; ++j) {{");
  b.line("const float x = kc_{}_of_x8(xin, j);", dt);
  PointwiseEmitter pe{g,
                      [&](Writer&, int node, int slot) {
                        return reads.at({node, slot}).value;
                      },
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
