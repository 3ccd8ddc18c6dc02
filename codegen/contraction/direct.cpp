// The direct SIMT kernel: one thread per output element, f32 math, any shape, layout, group
// count and dtype (the heuristics' fallback, and the path of grouped / depthwise convolutions).
#include "codegen/contraction_common.hpp"
#include "codegen/kernel_assembly.hpp"

namespace kiln::contraction {
namespace {

constexpr int kDirectThreads = 256;

// The kernel's operands: pointer parameters, strides and load functions.
struct DirectOperands {
  const TensorDesc& xd;
  const TensorDesc& wd;
  std::string xs, ws;
  std::vector<std::string> xst, wst;
};

// Output element `rem` -> (n, ko, oh, ow), then the sum over the filter window of its group's
// channels. Returns the epilogue coordinates and the kernel name.
std::vector<std::string> conv_element(Writer& b, const Problem& p, ArgList& a,
                                      const DirectOperands& o, std::string* name) {
  const ConvProblem& c = p.conv;
  const TensorDesc& yd = p.graph->tensor(p.y).desc;
  int64_t cg = c.c / c.groups, kg = c.k / c.groups;
  // Channel-fastest order for channels-last outputs (coalesced), spatial-fastest otherwise.
  bool chlast = yd.layout == Layout::NHWC;
  std::string k = a.dim(Dim(c.k)), oh = a.dim(c.oh), ow = a.dim(c.ow);
  if (chlast) b.line("const long long ko = rem % {}; rem /= {};", k, k);
  b.line("const long long ow = rem % {}; rem /= {};", ow, ow);
  b.line("const long long oh = rem % {}; rem /= {};", oh, oh);
  if (!chlast) b.line("const long long ko = rem % {}; rem /= {};", k, k);
  b.line("const long long n = rem;");
  b.line("const long long cbase = (ko / {}LL) * {}LL;", kg, cg);
  b.line("float acc = 0.f;");
  b.open("for (int r = 0; r < {}; ++r) {{", c.r);
  b.line("const long long ih = oh * {}LL - {}LL + r * {}LL;", c.stride_h, c.pad_t, c.dil_h);
  b.line("if (ih < 0 || ih >= {}) continue;", a.dim(c.h));
  b.open("for (int s = 0; s < {}; ++s) {{", c.s);
  b.line("const long long iw = ow * {}LL - {}LL + s * {}LL;", c.stride_w, c.pad_l, c.dil_w);
  b.line("if (iw < 0 || iw >= {}) continue;", a.dim(c.w));
  b.line("const {}* xp = {} + n * {} + cbase * {} + ih * {} + iw * {};", raw_type(o.xd.dtype), o.xs,
         o.xst[0], o.xst[1], o.xst[2], o.xst[3]);
  b.line("const {}* wp = {} + ko * {} + r * {} + s * {};", raw_type(o.wd.dtype), o.ws, o.wst[0],
         o.wst[2], o.wst[3]);
  b.line("for (int c = 0; c < {}; ++c) acc += {}(xp + c * {}) * {}(wp + c * {});", cg,
         load_fn(o.xd.dtype), o.xst[1], load_fn(o.wd.dtype), o.wst[1]);
  b.close();
  b.close();
  *name = fmt::format("conv_{}_{}_{}x{}", dtype_name(p.dtype),
                      o.xd.layout == Layout::NHWC ? "nhwc" : "nchw", c.r, c.s);
  if (c.stride_h != 1 || c.stride_w != 1)
    *name += (c.stride_h == c.stride_w ? fmt::format("_s{}", c.stride_h)
                                       : fmt::format("_s{}x{}", c.stride_h, c.stride_w));
  if (c.groups > 1) *name += c.groups == c.c && cg == 1 ? "_dw" : fmt::format("_g{}", c.groups);
  return {"n", "ko", "oh", "ow"};
}

// Output element `rem` -> (b.., i, j), then the dot product of A's row i and B's column j.
std::vector<std::string> matmul_element(Writer& b, const Problem& p, ArgList& a,
                                        const DirectOperands& o, std::string* name) {
  const MatmulProblem& m = p.mm;
  std::vector<std::string> coords;
  size_t nb = m.batch.size();
  std::string mn = a.dim(m.n), mm = a.dim(m.m);
  b.line("const long long j = rem % {}; rem /= {};", mn, mn);
  b.line("const long long i = rem % {}; rem /= {};", mm, mm);
  for (size_t i = nb; i-- > 0;) {
    std::string bd = a.dim(m.batch[i]);
    b.line("const long long b{} = rem % {}; rem /= {};", i, bd, bd);
    coords.insert(coords.begin(), fmt::format("b{}", i));
  }
  auto base = [&](const TensorDesc& d, const std::vector<std::string>& st) {
    size_t r = d.shape.size(), ob = r - 2;  // batch dims of this operand
    std::string off;
    for (size_t i = 0; i < ob; ++i) {
      if (d.shape[i].is_static() && d.shape[i].value() == 1) continue;
      off += fmt::format(" + b{} * {}", nb - ob + i, st[i]);
    }
    return off;
  };
  size_t ra = o.xd.shape.size(), rb = o.wd.shape.size();
  const auto& xst = o.xst;
  const auto& wst = o.wst;
  std::string sam = m.ta ? xst[ra - 1] : xst[ra - 2], sak = m.ta ? xst[ra - 2] : xst[ra - 1];
  std::string sbk = m.tb ? wst[rb - 1] : wst[rb - 2], sbn = m.tb ? wst[rb - 2] : wst[rb - 1];
  b.line("const {}* ap = {} + i * {}{};", raw_type(o.xd.dtype), o.xs, sam, base(o.xd, xst));
  b.line("const {}* bp = {} + j * {}{};", raw_type(o.wd.dtype), o.ws, sbn, base(o.wd, wst));
  b.line("float acc = 0.f;");
  b.line("for (long long kk = 0; kk < {}; ++kk) acc += {}(ap + kk * {}) * {}(bp + kk * {});",
         a.dim(m.k), load_fn(o.xd.dtype), sak, load_fn(o.wd.dtype), sbk);
  coords.push_back("i");
  coords.push_back("j");
  *name = fmt::format("matmul_{}{}{}", dtype_name(p.dtype), m.ta ? "_ta" : "", m.tb ? "_tb" : "");
  if (nb) *name += "_batched";
  return coords;
}

}  // namespace

KernelSpec emit_direct(const Problem& p) {
  const Graph& g = *p.graph;
  ArgList a;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  DirectOperands o{xd, wd, a.tensor(g, p.x, true), a.tensor(g, p.w, true), {}, {}};
  o.xst = stride_code(a, xd);
  o.wst = stride_code(a, wd);
  Dim total = shape_numel(g.tensor(p.y).desc.shape);
  // The element's body; the grid-stride loop around it takes the element count, registered
  // after the epilogue's arguments.
  Writer element;
  element.line("long long rem = idx;");
  std::string name;
  std::vector<std::string> coords =
      p.is_conv ? conv_element(element, p, a, o, &name) : matmul_element(element, p, a, o, &name);
  name += "_direct" + epilogue_suffix(p);
  EpilogueCode e = epilogue(p, a, coords, "acc", "");
  for (auto& l : e.lines) element.put(l);
  std::string tot = a.dim(total);
  Writer body;
  body.open(
      "for (long long idx = (long long)blockIdx.x * {} + threadIdx.x; idx < {}; idx += "
      "(long long)gridDim.x * {}) {{",
      kDirectThreads, tot, kDirectThreads);
  body.raw(element.str());
  body.close();

  KernelSpec k;
  k.name = name;
  k.entry = name;
  k.source = assemble_kernel(device_preamble(),
                             {name, std::to_string(kDirectThreads), 0, 0, a.params()}, body.str());
  k.args = a.args();
  k.grid = {(total + Dim(kDirectThreads - 1)) / Dim(kDirectThreads), Dim(1), Dim(1)};
  k.block = {kDirectThreads, 1, 1};
  k.smem_bytes = 0;
  k.bytes_moved = bytes_moved(p);
  k.flops = flops(p);
  k.group = p.group->id;
  return k;
}

}  // namespace kiln::contraction
