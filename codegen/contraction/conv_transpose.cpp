// The direct gather-form conv_transpose2d kernel: each thread computes `channels_per_thread`
// output channels of one output pixel (n, oh, ow) in f32, visiting only the filter taps that
// reach it (heuristics/conv_transpose_layout.hpp: r with (oh + pad_t - r * dil_h) a multiple of
// stride_h, likewise s), over the input channels of its group; then the fused epilogue (bias,
// activations, residual adds) of every contraction kernel. Any layout, dtype and group count.
#include "codegen/contraction_common.hpp"
#include "codegen/kernel_assembly.hpp"
#include "heuristics/conv_transpose_layout.hpp"

namespace kiln::contraction {
namespace {

ConvTransposeShape shape_of(const Problem& p) {
  const ConvProblem& c = p.conv;
  const TensorDesc& yd = p.graph->tensor(p.y).desc;
  ConvTransposeShape s;
  s.kg = c.k / c.groups;
  s.cg = c.c / c.groups;
  s.r = c.r;
  s.s = c.s;
  s.stride_h = c.stride_h;
  s.stride_w = c.stride_w;
  s.dil_h = c.dil_h;
  s.dil_w = c.dil_w;
  s.channels_last = yd.layout == Layout::NHWC;
  const Dim total = shape_numel(yd.shape);
  s.outputs = total.is_static() ? total.value() : -1;
  return s;
}

// The loop over one axis's contributing taps `t` (r or s) of output coordinate `o`, defining the
// input coordinate `i`; closed by the caller.
void open_taps(Writer& b, const ConvTransposeTaps& tp, const char* t, const char* o, const char* i,
               int64_t pad, int64_t stride, int64_t dil, int64_t taps, const std::string& size) {
  if (tp.step == 1 && tp.gcd == 1) {
    b.open("for (int {} = 0; {} < {}; ++{}) {{", t, t, taps, t);
  } else {
    b.line("const long long ph_{} = ({} + {}LL) % {}LL;", t, o, pad, stride);
    b.open(
        "for (int {0} = ph_{0} % {1} == 0 ? (int)((ph_{0} / {1}) * {2} % {3}) : {4}; {0} < {4}; "
        "{0} += {3}) {{",
        t, tp.gcd, tp.inverse, tp.step, taps);
  }
  // Later taps reach lower input coordinates: past 0 none is left.
  b.line("const long long {}n = {} + {}LL - {} * {}LL;", i, o, pad, t, dil);
  b.line("if ({}n < 0) break;", i);
  b.line("const long long {} = {}n / {}LL;", i, i, stride);
  b.line("if ({} >= {}) continue;", i, size);
}

std::string kernel_name(const Problem& p, const ConvTransposeLayout& L) {
  const ConvProblem& c = p.conv;
  const TensorDesc& xd = p.graph->tensor(p.x).desc;
  std::string name = fmt::format("conv_transpose_{}_{}_{}x{}", dtype_name(p.dtype),
                                 xd.layout == Layout::NHWC ? "nhwc" : "nchw", c.r, c.s);
  if (c.stride_h != 1 || c.stride_w != 1) name += fmt::format("_s{}x{}", c.stride_h, c.stride_w);
  if (c.dil_h != 1 || c.dil_w != 1) name += fmt::format("_d{}x{}", c.dil_h, c.dil_w);
  if (c.groups > 1) name += c.groups == c.c && c.k == c.c ? "_dw" : fmt::format("_g{}", c.groups);
  if (L.channels_per_thread > 1) name += fmt::format("_k{}", L.channels_per_thread);
  return name + "_direct" + epilogue_suffix(p);
}

// Work item `rem` -> (n, ko0, oh, ow), the taps' sums into acc[0..KC).
void emit_sums(Writer& b, const Problem& p, const ConvTransposeLayout& L, ArgList& a) {
  const Graph& g = *p.graph;
  const ConvProblem& c = p.conv;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  const std::string xs = a.tensor(g, p.x, true), ws = a.tensor(g, p.w, true);
  const std::vector<std::string> xst = stride_code(a, xd), wst = stride_code(a, wd);
  const int kc = L.channels_per_thread;
  const int64_t cg = c.c / c.groups, kg = c.k / c.groups;
  const std::string kq = a.dim(Dim(c.k / kc)), oh = a.dim(c.oh), ow = a.dim(c.ow);
  if (L.channel_fastest) b.line("const long long kq = rem % {}; rem /= {};", kq, kq);
  b.line("const long long ow = rem % {}; rem /= {};", ow, ow);
  b.line("const long long oh = rem % {}; rem /= {};", oh, oh);
  if (!L.channel_fastest) b.line("const long long kq = rem % {}; rem /= {};", kq, kq);
  b.line("const long long n = rem;");
  b.line("const long long ko0 = kq * {}LL;", kc);
  // The KC channels lie in one group (KC divides K / groups).
  b.line("const long long cbase = (ko0 / {}LL) * {}LL, kk0 = ko0 % {}LL;", kg, cg, kg);
  b.line("float acc[{}];", kc);
  b.line("#pragma unroll");
  b.line("for (int j = 0; j < {}; ++j) acc[j] = 0.f;", kc);
  open_taps(b, L.taps_h, "r", "oh", "ih", c.pad_t, c.stride_h, c.dil_h, c.r, a.dim(c.h));
  open_taps(b, L.taps_w, "s", "ow", "iw", c.pad_l, c.stride_w, c.dil_w, c.s, a.dim(c.w));
  b.line("const {}* xp = {} + n * {} + cbase * {} + ih * {} + iw * {};", raw_type(xd.dtype), xs,
         xst[0], xst[1], xst[2], xst[3]);
  b.line("const {}* wp = {} + cbase * {} + kk0 * {} + r * {} + s * {};", raw_type(wd.dtype), ws,
         wst[0], wst[1], wst[2], wst[3]);
  b.open("for (int c = 0; c < {}; ++c) {{", cg);
  b.line("const float xv = {}(xp + c * {});", load_fn(xd.dtype), xst[1]);
  b.line("#pragma unroll");
  b.line("for (int j = 0; j < {}; ++j) acc[j] += xv * {}(wp + c * {} + j * {});", kc,
         load_fn(wd.dtype), wst[0], wst[1]);
  b.close();
  b.close();
  b.close();
}

}  // namespace

KernelSpec emit_conv_transpose(const Problem& p) {
  const Graph& g = *p.graph;
  const ConvTransposeLayout L = choose_conv_transpose_layout(shape_of(p));
  ArgList a;
  Writer element;
  element.line("long long rem = idx;");
  emit_sums(element, p, L, a);
  element.line("#pragma unroll");
  element.open("for (int j = 0; j < {}; ++j) {{", L.channels_per_thread);
  element.line("const long long ko = ko0 + j;");
  EpilogueCode e = epilogue(p, a, {"n", "ko", "oh", "ow"}, "acc[j]", "");
  for (auto& l : e.lines) element.put(l);
  element.close();
  // Work items: output pixels times channel blocks; registered after the epilogue's arguments.
  const Dim items = shape_numel(g.tensor(p.y).desc.shape) / Dim(L.channels_per_thread);
  const std::string tot = a.dim(items);
  const int T = L.threads;
  Writer body;
  body.open(
      "for (long long idx = (long long)blockIdx.x * {} + threadIdx.x; idx < {}; idx += "
      "(long long)gridDim.x * {}) {{",
      T, tot, T);
  body.raw(element.str());
  body.close();

  const std::string name = kernel_name(p, L);
  KernelSpec k;
  k.name = name;
  k.entry = name;
  k.source =
      assemble_kernel(device_preamble(), {name, std::to_string(T), 0, 0, a.params()}, body.str());
  k.args = a.args();
  k.grid = {(items + Dim(T - 1)) / Dim(T), Dim(1), Dim(1)};
  k.block = {T, 1, 1};
  k.smem_bytes = 0;
  k.bytes_moved = bytes_moved(p);
  k.flops = flops(p);
  k.group = p.group->id;
  return k;
}

}  // namespace kiln::contraction
