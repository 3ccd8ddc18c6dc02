// The tiled depthwise conv kernel (NHWC 16-bit, one channel per group; heuristics/
// depthwise_tile.hpp). A CTA owns tile_h x tile_w output pixels of one image and nv 8-channel
// vectors: it copies the f32 filters of its channels and its input tile (halo included, zeros
// outside the image) into shared memory, cp.async 16 bytes at a time, all in flight at once;
// then each thread slides one 8-channel vector along `pixels` output pixels of a row, a filter
// row's weights in registers and every input column of its window read once from shared memory.
// Each input element leaves DRAM once per CTA, so the kernel runs at the DRAM rate where the
// filter is small and at the FMA rate where it is large.
#include "codegen/contraction/grouped_kernel.hpp"
#include "codegen/kernel_assembly.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

// The CTA's tile origin, its filters and its input tile into shared memory.
void emit_fill(GroupedKernel& k) {
  const ConvProblem& c = k.p.conv;
  const DepthwiseTile& t = k.L.tile;
  const TensorDesc& wd = k.p.graph->tensor(k.p.w).desc;
  Writer& b = k.b;
  const int ct = t.nv * 8;
  b.line("extern __shared__ __align__(16) float kg_w[];");
  b.line("const int tid = threadIdx.x;");
  b.line("long long q = blockIdx.x;");
  b.line("const long long tw_i = q % {};", t.tiles_w);
  b.line("q /= {};", t.tiles_w);
  b.line("const long long th_i = q % {};", t.tiles_h);
  b.line("const long long n = q / {};", t.tiles_h);
  b.line("const long long c0 = (long long)blockIdx.y * {};", ct);
  b.line("const int ih0 = (int)(th_i * {}) - {};", t.tile_h * c.stride_h, c.pad_t);
  b.line("const int iw0 = (int)(tw_i * {}) - {};", t.tile_w * c.stride_w, c.pad_l);
  {
    auto l = b.block("for (int i = tid; i < {}; i += {}) {{", c.r * c.s * ct, t.threads);
    b.line("const int kl = i % {}, tap = i / {};", ct, ct);
    b.line("const int r = tap / {}, sx = tap % {};", c.s, c.s);
    b.line("kg_w[i] = {}({} + (c0 + kl) * {} + r * {} + sx * {});", load_fn(wd.dtype), k.ws,
           k.wst[0], k.wst[2], k.wst[3]);
  }
  b.line("const unsigned xs_u32 = kc_smem_u32(kg_w + {});", c.r * c.s * ct);
  b.line("const {}* const xn = {} + n * {} + c0;", raw_type(k.p.dtype), k.xs, k.xst[0]);
  {
    auto l = b.block("for (int i = tid; i < {}; i += {}) {{", int64_t{t.in_h} * t.in_w * t.nv,
                     t.threads);
    b.line("const int v = i % {}, q2 = i / {};", t.nv, t.nv);
    b.line("const int ix = q2 % {}, iy = q2 / {};", t.in_w, t.in_w);
    b.line("const int ih = ih0 + iy, iw = iw0 + ix;");
    b.line("const bool ok = ih >= 0 && ih < {} && iw >= 0 && iw < {};", k.a.dim(c.h), k.a.dim(c.w));
    b.line(
        "const void* src = ok ? (const void*)(xn + ih * {} + iw * {} + v * 8) : (const void*)xn;",
        k.xst[2], k.xst[3]);
    b.line("kc_cp_async16(xs_u32 + (iy * {} + ix * {} + v) * 16, src, ok);", t.pitch, t.nv);
  }
  b.line("kc_cp_async_commit();");
  b.line("kc_cp_async_wait<0>();");
  b.line("__syncthreads();");
}

// The thread's vector and pixels, then the filter rows: a row's weights into registers, each
// input column of the window once from shared memory against every tap that reads it.
void emit_compute(GroupedKernel& k) {
  const ConvProblem& c = k.p.conv;
  const DepthwiseTile& t = k.L.tile;
  Writer& b = k.b;
  const int ct = t.nv * 8;
  const int64_t cols = (t.pixels - 1) * c.stride_w + (c.s - 1) * c.dil_w + 1;
  b.line("const int v = tid % {}, ty = (tid / {}) % {}, gx = tid / {};", t.nv, t.nv, t.tile_h,
         t.nv * t.tile_h);
  b.line("const long long oh = th_i * {} + ty;", t.tile_h);
  b.line("const long long ow0 = tw_i * {} + gx * {};", t.tile_w, t.pixels);
  b.line("if (oh >= {} || ow0 >= {}) return;", k.a.dim(c.oh), k.a.dim(c.ow));
  b.line("const long long k0 = c0 + v * 8;");
  b.line("float acc[{}][8];", t.pixels);
  b.line("#pragma unroll");
  b.line("for (int p = 0; p < {}; ++p)", t.pixels);
  b.line("  #pragma unroll");
  b.line("  for (int e = 0; e < 8; ++e) acc[p][e] = 0.f;");
  b.line("const uint4* const xt = (const uint4*)(kg_w + {}) + ty * {} + gx * {} + v;",
         c.r * c.s * ct, c.stride_h * t.pitch, t.pixels * c.stride_w * t.nv);
  b.line("const float* const kw = kg_w + v * 8;");
  b.put(c.r * c.s <= 25 ? "#pragma unroll" : "#pragma unroll 1");
  auto lr = b.block("for (int r = 0; r < {}; ++r) {{", c.r);
  b.line("float wv[{}][8];", c.s);
  b.line("#pragma unroll");
  b.line("for (int s = 0; s < {}; ++s)", c.s);
  b.line("  #pragma unroll");
  b.line("  for (int e = 0; e < 8; ++e) wv[s][e] = kw[(r * {} + s) * {} + e];", c.s, ct);
  b.line("const uint4* const xr = xt + r * {};", c.dil_h * t.pitch);
  b.line("#pragma unroll");
  auto lj = b.block("for (int j = 0; j < {}; ++j) {{", cols);
  b.line("float xv[8];");
  b.line("kg_ld_{}<8, 8>((const unsigned short*)(xr + j * {}), xv);", dtype_name(k.p.dtype), t.nv);
  b.line("#pragma unroll");
  auto ls = b.block("for (int s = 0; s < {}; ++s) {{", c.s);
  // Taps whose output pixel is not the thread's fall away at compile time (j, s unrolled).
  b.line("const int jj = j - s * {};", c.dil_w);
  b.line("if (jj < 0 || jj % {} != 0 || jj / {} >= {}) continue;", c.stride_w, c.stride_w,
         t.pixels);
  b.line("#pragma unroll");
  b.line("for (int e = 0; e < 8; ++e)");
  b.line("  acc[jj / {}][e] = fmaf(xv[e], wv[s][e], acc[jj / {}][e]);", c.stride_w, c.stride_w);
}

}  // namespace

KernelSpec emit_depthwise_tiled(const Problem& p, const GroupedConvLayout& L) {
  const Graph& g = *p.graph;
  const DepthwiseTile& t = L.tile;
  KILN_ASSERT(t.ok, "{}: the tiled depthwise kernel without a tile", p.where);
  GroupedKernel k{p, L};
  k.xs = k.a.tensor(g, p.x, true);
  k.ws = k.a.tensor(g, p.w, true);
  k.xst = stride_code(k.a, g.tensor(p.x).desc);
  k.wst = stride_code(k.a, g.tensor(p.w).desc);
  emit_fill(k);
  emit_compute(k);
  emit_grouped_stores(k, 8, t.pixels);

  const std::string name = grouped_kernel_name(p, L);
  KernelSpec s;
  s.name = name;
  s.entry = name;
  s.source = assemble_kernel(device_preamble() + device_text("contraction_grouped.cuh") + "\n",
                             {name, std::to_string(t.threads), 0, 0, k.a.params()}, k.b.str());
  s.args = k.a.args();
  const ConvProblem& c = p.conv;
  s.grid = {c.n * Dim(t.tiles_h * t.tiles_w), Dim(c.k / (t.nv * 8)), Dim(1)};
  s.block = {t.threads, 1, 1};
  s.smem_bytes = static_cast<int>(t.smem_bytes);
  s.bytes_moved = bytes_moved(p);
  s.flops = flops(p);
  s.group = p.group->id;
  return s;
}

}  // namespace kiln::contraction
