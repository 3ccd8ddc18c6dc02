// The grouped / depthwise conv kernel (NHWC, 1 < groups, up to 64 input channels per group):
// every thread accumulates, in f32, `vec` consecutive output channels of `pixels` consecutive
// output pixels of one row (heuristics/grouped_conv_layout.hpp). The CTA's filters sit in shared
// memory as f32, [r][s][ci][CTA channel]; a filter tap's weights of the thread are read into
// registers once and reused over its pixels. Depthwise-like convs (one input channel per group)
// keep a whole filter row in registers and slide along the input row: each input column of the
// thread's window is one 16-byte load (8 channels) for every tap that reads it.
#include "codegen/contraction/grouped_kernel.hpp"
#include "codegen/kernel_assembly.hpp"
#include "engine/base/check.hpp"
#include "heuristics/grouped_conv_layout.hpp"

namespace kiln::contraction {
namespace {

constexpr int kThreads = 256;

}  // namespace

GroupedConvShape grouped_shape(const Problem& p, int sm) {
  const ConvProblem& c = p.conv;
  GroupedConvShape s;
  s.sm = sm;
  s.c = c.c;
  s.k = c.k;
  s.groups = c.groups;
  s.r = c.r;
  s.s = c.s;
  s.stride_h = c.stride_h;
  s.stride_w = c.stride_w;
  s.dil_h = c.dil_h;
  s.dil_w = c.dil_w;
  s.oh = c.oh.is_static() ? c.oh.value() : -1;
  s.ow = c.ow.is_static() ? c.ow.value() : -1;
  s.elem_bytes = p.dtype == DType::F32 ? 4 : 2;
  // A symbolic batch at the planner's guess (problem_info's), for the pixel groups per thread.
  const Dim pixels = c.n * c.oh * c.ow;
  std::vector<std::string> syms;
  pixels.symbols(&syms);
  Bindings b;
  for (const std::string& name : syms) b[name] = symbol_guess(p);
  s.pixels_estimate = pixels.eval(b);
  return s;
}

namespace {

// The CTA's filters into shared memory (zero past K), then the thread's tile origin.
void emit_origin(GroupedKernel& k, const std::string& total_pg, const std::string& owt) {
  const ConvProblem& c = k.p.conv;
  const GroupedConvLayout& L = k.L;
  Writer& b = k.b;
  const TensorDesc& wd = k.p.graph->tensor(k.p.w).desc;
  b.line("extern __shared__ __align__(16) float kg_w[];");
  b.line("const int tid = threadIdx.x;");
  b.line("const int tx = tid % {}, ty = tid / {};", L.threads_c, L.threads_c);
  b.line("const long long kc0 = (long long)blockIdx.y * {};", k.tcv);
  {
    auto l = b.block("for (int i = tid; i < {}; i += {}) {{", c.r * c.s * L.cg * k.tcv, L.threads);
    b.line("const int kl = i % {};", k.tcv);
    b.line("int q = i / {};", k.tcv);
    b.line("const int ci = q % {}; q /= {};", L.cg, L.cg);
    b.line("const int sx = q % {}, r = q / {};", c.s, c.s);
    b.line("const long long kk = kc0 + kl;");
    b.line("kg_w[i] = kk < {} ? {}({} + kk * {} + ci * {} + r * {} + sx * {}) : 0.f;", c.k,
           load_fn(wd.dtype), k.ws, k.wst[0], k.wst[1], k.wst[2], k.wst[3]);
  }
  b.line("__syncthreads();");
  b.line("const long long k0 = kc0 + tx * {};", L.vec);
  b.line("if (k0 >= {}) return;", c.k);
  // The thread's pixel groups one after the other (the filters above loaded once for them).
  b.line("#pragma unroll 1");
  b.open("for (int it = 0; it < {}; ++it) {{", L.iters);
  b.line("const long long pg = ((long long)blockIdx.x * {} + it) * {} + ty;", L.iters, L.threads_p);
  b.line("if (pg >= {}) return;", total_pg);
  b.line("const long long owt = pg % {};", owt);
  b.line("long long q = pg / {};", owt);
  std::string oh = k.a.dim(c.oh);
  b.line("const long long oh = q % {};", oh);
  b.line("const long long n = q / {};", oh);
  b.line("const long long ow0 = owt * {};", L.pixels);
  b.line("const long long ic0 = (k0 / {}) * {};", L.kg, L.cg);
  b.line("const int iw0 = (int)(ow0 * {} - {});", c.stride_w, c.pad_l);
  b.line("float acc[{}][{}];", L.pixels, L.vec);
  b.line("#pragma unroll");
  b.line("for (int p = 0; p < {}; ++p)", L.pixels);
  b.line("  #pragma unroll");
  b.line("  for (int v = 0; v < {}; ++v) acc[p][v] = 0.f;", L.vec);
  b.line("const float* const kw = kg_w + tx * {};", L.vec);
}

// The filter row loop's head: the input row (skipped in the padding) and its pointer at ic0.
void open_row(GroupedKernel& k) {
  const ConvProblem& c = k.p.conv;
  Writer& b = k.b;
  b.put(k.L.unroll_rows ? "#pragma unroll" : "#pragma unroll 1");
  b.open("for (int r = 0; r < {}; ++r) {{", c.r);
  b.line("const long long ih = oh * {} - {} + r * {};", c.stride_h, c.pad_t, c.dil_h);
  b.line("if (ih < 0 || ih >= {}) continue;", k.a.dim(c.h));
  b.line("const {}* const xr = {} + n * {} + ih * {} + ic0;", raw_type(k.p.dtype), k.xs, k.xst[0],
         k.xst[2]);
}

// Depthwise-like: the row's weights in registers, one load per input column of the window.
void emit_sliding(GroupedKernel& k) {
  const ConvProblem& c = k.p.conv;
  const GroupedConvLayout& L = k.L;
  Writer& b = k.b;
  const int64_t cols = (L.pixels - 1) * c.stride_w + (c.s - 1) * c.dil_w + 1;
  open_row(k);
  b.line("float wv[{}][{}];", c.s, L.vec);
  b.line("#pragma unroll");
  b.line("for (int s = 0; s < {}; ++s)", c.s);
  b.line("  #pragma unroll");
  b.line("  for (int v = 0; v < {}; ++v) wv[s][v] = kw[(r * {} + s) * {} + v];", L.vec, c.s, k.tcv);
  b.line("#pragma unroll");
  {
    auto lj = b.block("for (int j = 0; j < {}; ++j) {{", cols);
    b.line("const int iw = iw0 + j;");
    b.line("if (iw < 0 || iw >= {}) continue;", k.a.dim(c.w));
    b.line("float xv[{}];", L.span);
    b.line("kg_ld_{}<{}, {}>(xr + iw * {}, xv);", dtype_name(k.p.dtype), L.span, L.x_vec, k.xst[3]);
    b.line("#pragma unroll");
    auto ls = b.block("for (int s = 0; s < {}; ++s) {{", c.s);
    // Taps whose output pixel is not the thread's fall away at compile time (j, s unrolled).
    b.line("const int jj = j - s * {};", c.dil_w);
    b.line("if (jj < 0 || jj % {} != 0 || jj / {} >= {}) continue;", c.stride_w, c.stride_w,
           L.pixels);
    b.line("#pragma unroll");
    b.line("for (int v = 0; v < {}; ++v)", L.vec);
    b.line("  acc[jj / {}][v] = fmaf(xv[v / {}], wv[s][v], acc[jj / {}][v]);", c.stride_w,
           L.vec_per_group, c.stride_w);
  }
  b.close();
}

// One chunk of input channels of a filter row: per tap, its weights into registers, then every
// pixel's chunk (one or a few vector loads) against them.
void emit_chunk_loop(GroupedKernel& k, int64_t chunks, const std::string& ci,
                     const std::string& gi) {
  const ConvProblem& c = k.p.conv;
  const GroupedConvLayout& L = k.L;
  Writer& b = k.b;
  const int vg = L.vec_per_group;
  auto lc = b.block("for (int c0 = 0; c0 < {}; c0 += {}) {{", chunks * L.chunk, L.chunk);
  b.line("#pragma unroll");
  auto ls = b.block("for (int s = 0; s < {}; ++s) {{", c.s);
  b.line("float wv[{}][{}];", L.chunk, vg);
  b.line("#pragma unroll");
  b.line("for (int i = 0; i < {}; ++i)", L.chunk);
  b.line("  #pragma unroll");
  b.line("  for (int v = 0; v < {}; ++v)", vg);
  b.line("    wv[i][v] = kw[((r * {} + s) * {} + {}) * {} + {} * {} + v];", c.s, L.cg, ci, k.tcv,
         gi, vg);
  b.line("#pragma unroll");
  auto lp = b.block("for (int p = 0; p < {}; ++p) {{", L.pixels);
  b.line("const int iw = iw0 + p * {} + s * {};", c.stride_w, c.dil_w);
  b.line("if (iw < 0 || iw >= {}) continue;", k.a.dim(c.w));
  b.line("float xv[{}];", L.chunk);
  b.line("kg_ld_{}<{}, {}>(xr + iw * {} + c0, xv);", dtype_name(k.p.dtype), L.chunk, L.x_vec,
         k.xst[3]);
  b.line("#pragma unroll");
  b.line("for (int i = 0; i < {}; ++i)", L.chunk);
  b.line("  #pragma unroll");
  b.line("  for (int v = 0; v < {}; ++v)", vg);
  b.line("    acc[p][{} * {} + v] = fmaf(xv[i], wv[i][v], acc[p][{} * {} + v]);", gi, vg, gi, vg);
}

// Several input channels per group: the filter row's chunks of input channels (one chunk
// holding every group of the thread where it spans several).
void emit_chunked(GroupedKernel& k) {
  const GroupedConvLayout& L = k.L;
  Writer& b = k.b;
  const bool multi = L.groups_per_thread > 1;  // one chunk: every group of the thread
  const std::string ci = multi ? fmt::format("(i % {})", L.cg) : "(c0 + i)";
  const std::string gi = multi ? fmt::format("(i / {})", L.cg) : "0";
  open_row(k);
  const int64_t chunks = (multi ? L.span : L.cg) / L.chunk;
  if (chunks > 1) b.line("#pragma unroll 1");
  emit_chunk_loop(k, chunks, ci, gi);
  b.close();  // the filter row
}

}  // namespace

void emit_grouped_stores(GroupedKernel& k, int vec, int pixels) {
  const ConvProblem& c = k.p.conv;
  const Graph& g = *k.p.graph;
  Writer& b = k.b;
  b.line("#pragma unroll");
  auto lp = b.block("for (int p = 0; p < {}; ++p) {{", pixels);
  b.line("const long long ow = ow0 + p;");
  b.line("if (ow >= {}) continue;", k.a.dim(c.ow));
  for (int t : k.p.group->outputs) b.line("float o{}[{}];", t, vec);
  EpilogueCode e = epilogue(k.p, k.a, {"n", "col", "oh", "ow"}, "acc_v", "", "o", "v");
  {
    b.line("#pragma unroll");
    auto lv = b.block("for (int v = 0; v < {}; ++v) {{", vec);
    b.line("const long long col = k0 + v;");
    b.line("const float acc_v = acc[p][v];");
    for (auto& l : e.lines) b.put(l);
  }
  for (int t : k.p.group->outputs) {
    const TensorDesc& td = g.tensor(t).desc;
    const auto st = stride_code(k.a, td);
    const std::string ptr = k.a.tensor(g, t, false);
    if (td.layout == Layout::NHWC && st[1] == "1LL") {
      int w = td.dtype == DType::F32 ? 4 : 8;
      while (vec % w != 0) w /= 2;
      for (int i = 0; i < vec; i += w)
        b.line("kg_st_{}<{}>({} + n * {} + (k0 + {}) + oh * {} + ow * {}, o{} + {});",
               dtype_name(td.dtype), w, ptr, st[0], i, st[2], st[3], t, i);
    } else {
      b.line("#pragma unroll");
      b.line("for (int v = 0; v < {}; ++v)", vec);
      b.line("  {}({} + n * {} + (k0 + v) * {} + oh * {} + ow * {}, o{}[v]);", store_fn(td.dtype),
             ptr, st[0], st[1], st[2], st[3], t);
    }
  }
}

std::string grouped_kernel_name(const Problem& p, const GroupedConvLayout& L) {
  const ConvProblem& c = p.conv;
  std::string name = fmt::format("conv_{}_nhwc_", dtype_name(p.dtype));
  if (L.cg == 1)
    name += fmt::format("dw{}x{}", c.r, c.s) + (L.kg > 1 ? fmt::format("_m{}", L.kg) : "");
  else
    name += fmt::format("g{}_{}x{}", c.groups, c.r, c.s);
  if (c.stride_h != 1 || c.stride_w != 1)
    name += c.stride_h == c.stride_w ? fmt::format("_s{}", c.stride_h)
                                     : fmt::format("_s{}x{}", c.stride_h, c.stride_w);
  if (c.dil_h != 1 || c.dil_w != 1) name += fmt::format("_d{}", std::max(c.dil_h, c.dil_w));
  if (L.tile.ok)
    return name + fmt::format("_t{}x{}c{}", L.tile.tile_h, L.tile.tile_w, L.tile.nv * 8) +
           epilogue_suffix(p);
  return name + fmt::format("_c{}x{}", L.vec, L.pixels) + epilogue_suffix(p);
}

bool grouped_supported(const Problem& p, int sm) {
  if (!p.is_conv || p.conv.groups < 2) return false;
  const TensorDesc& xd = p.graph->tensor(p.x).desc;
  // The tensor-core kernel copies the filters' 16-bit values as they are.
  if (xd.layout != Layout::NHWC || xd.dtype != p.dtype) return false;
  if (p.graph->tensor(p.w).desc.dtype != p.dtype) return false;
  if (p.dtype != DType::F16 && p.dtype != DType::BF16 && p.dtype != DType::F32) return false;
  return grouped_conv_layout(grouped_shape(p, sm)).ok;
}

KernelSpec emit_grouped(const Problem& p, int sm) {
  KILN_ASSERT(grouped_supported(p, sm), "{}: grouped conv kernel on an unsupported conv", p.where);
  const Graph& g = *p.graph;
  const GroupedConvLayout L = grouped_conv_layout(grouped_shape(p, sm));
  if (L.mma) return emit_grouped_mma(p, L);
  if (L.tile.ok) return emit_depthwise_tiled(p, L);
  GroupedKernel k{p, L};
  k.tcv = L.threads_c * L.vec;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  k.xs = k.a.tensor(g, p.x, true);
  k.ws = k.a.tensor(g, p.w, true);
  k.xst = stride_code(k.a, xd);
  k.wst = stride_code(k.a, wd);
  const ConvProblem& c = p.conv;
  const Dim owt = (c.ow + Dim(L.pixels - 1)) / Dim(L.pixels);
  const Dim total_pg = c.n * c.oh * owt;
  emit_origin(k, k.a.dim(total_pg), k.a.dim(owt));
  if (L.sliding)
    emit_sliding(k);
  else
    emit_chunked(k);
  emit_grouped_stores(k, L.vec, L.pixels);
  k.b.close();  // the pixel groups

  const std::string name = grouped_kernel_name(p, L);
  KernelSpec s;
  s.name = name;
  s.entry = name;
  s.source = assemble_kernel(device_preamble() + device_text("contraction_grouped.cuh") + "\n",
                             {name, std::to_string(kThreads), 0, 0, k.a.params()}, k.b.str());
  s.args = k.a.args();
  const int64_t per_cta = int64_t{L.threads_p} * L.iters;
  s.grid = {(total_pg + Dim(per_cta - 1)) / Dim(per_cta), Dim((c.k + k.tcv - 1) / k.tcv), Dim(1)};
  s.block = {L.threads, 1, 1};
  s.smem_bytes = static_cast<int>(L.smem_bytes);
  s.bytes_moved = bytes_moved(p);
  s.flops = flops(p);
  s.group = p.group->id;
  return s;
}

}  // namespace kiln::contraction
