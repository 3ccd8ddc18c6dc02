// The frame every tensor-core kernel shares: where its tile is, the k tiles it runs, the call of
// the mainloop (codegen/device/contraction_{mma,wgmma}.cuh) and split-K's reduction.
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

void emit_tile_origin(TcKernel& k) {
  Writer& b = k.body;
  const ContractionConfig& cfg = k.L.cfg;
  b.line("extern __shared__ __align__(128) unsigned short kc_smem[];");
  if (k.L.n_fast) {
    // N tiles fastest in a 1-D grid: the CTAs that share an A tile run at the same time, so
    // it comes from DRAM once (m tiles fastest streamed A once per N tile where it is bigger
    // than L2: the ResNet-50 1x1 1024 -> 256 conv at N = 128 reads 51 MB of A).
    b.line("const long long kc_mt = blockIdx.x / {};", k.L.tiles_n);
    b.line("const long long m0 = kc_mt * {};", cfg.bm);
    b.line("const long long n0 = (long long)(blockIdx.x % {}) * {};", k.L.tiles_n, cfg.bn);
  } else {
    b.line("const long long kc_mt = blockIdx.x;");
    b.line("const long long m0 = kc_mt * {};", cfg.bm);
    b.line("const long long n0 = (long long)blockIdx.y * {};", cfg.bn);
  }
  b.line("const int tid = threadIdx.x;");
}

namespace {

// The epilogue tile after the stages, its barrier, and the TMA maps of the prefetched residual
// and the stored output.
void emit_epilogue_tile(TcKernel& k) {
  const ContractionLayout& L = k.L;
  const Graph& g = *k.p.graph;
  Writer& b = k.body;
  if (!L.tile_in_smem()) return;
  b.line("// the residual / output tile: {} slabs of {} x 64 after the stages, then a barrier",
         L.cfg.bn / 64, L.cfg.bm);
  b.line("unsigned short* const kc_rtile = G::aligned(kc_smem) + {};", L.stage_bytes / 2);
  b.line("const unsigned kc_rbar = kc_smem_u32(kc_rtile + {});", L.cfg.bm * L.cfg.bn);
  if (L.residual >= 0) {
    k.a.tensor(g, L.residual, true);  // a plain pointer too, as every TMA operand has
    const std::string mr = k.a.tensor_map_2d(L.residual, k.v.gm, k.v.gn, k.v.gn, L.cfg.bm, 64);
    b.line("const KcTmaDesc& kc_rmap = {};", mr);
    b.line("if (threadIdx.x == 0) kc_mbar_init(kc_rbar, 1);  // fenced and synced by mainloop");
  }
  if (L.tma_store >= 0) {
    k.a.tensor(g, L.tma_store, false);
    const std::string mo = k.a.tensor_map_2d(L.tma_store, k.v.gm, k.v.gn, k.v.gn, L.cfg.bm, 64);
    b.line("const KcTmaDesc& kc_omap = {};", mo);
  }
}

}  // namespace

void emit_tile_decode(TcKernel& k) {
  const ContractionLayout& L = k.L;
  Writer& b = k.body;
  if (L.pixel_blocks) {  // blockIdx.x -> (image, block row, block column) of output pixels
    const int64_t tw = L.pixel_tiles_w, th = L.pixel_tiles_h;
    b.line("const long long sp_ow0 = (kc_mt % {}) * {};", tw, L.pixel_cols);
    b.line("const long long sp_oh0 = (kc_mt / {} % {}) * {};", tw, th, L.pixel_rows);
    b.line("const long long sp_n = kc_mt / {};", tw * th);
  }
  if (!k.p.is_conv && !k.p.mm.batch.empty()) {
    b.line("long long bz = blockIdx.z;");
    for (size_t i = k.p.mm.batch.size(); i-- > 0;) {
      std::string d = k.a.dim(k.p.mm.batch[i]);
      b.line("const long long b{} = bz % {}; bz /= {};", i, d, d);
    }
  }
  emit_epilogue_tile(k);
}

void emit_k_range(TcKernel& k) {
  Writer& b = k.body;
  const ContractionConfig& cfg = k.L.cfg;
  b.line("float acc[G::MI][G::NI][4];");
  b.line("const int ktiles = (int)(({} + {}) / {});", k.v.kred, cfg.bk - 1, cfg.bk);
  if (cfg.split_k > 1) {
    // Split z takes k tiles [kt0, kt1) (possibly none: its partial sum is zero).
    b.line("const int kper = (ktiles + {}) / {};", cfg.split_k - 1, cfg.split_k);
    b.line("const int kt0 = min(ktiles, (int)blockIdx.z * kper), kt1 = min(ktiles, kt0 + kper);");
  } else {
    b.line("const int kt0 = 0, kt1 = ktiles;");
  }
}

void emit_mainloop_call(TcKernel& k) {
  Writer& b = k.body;
  if (k.L.mainloop == ContractionMainloop::MmaSync) {
    b.line("G::mainloop(kc_smem, load_a, load_b, kt0, kt1, acc);");
    return;
  }
  b.line(
      "auto mma = [](const unsigned long long (&da)[4], const unsigned long long (&db)[4], "
      "float (&c)[1][G::NI][4]) {{ kc_wgmma4_n{}(da, db, c); }};",
      k.L.cfg.bn);
  if (k.L.mainloop == ContractionMainloop::WgmmaCpAsync) {
    b.line("G::mainloop(G::aligned(kc_smem), load_a, load_b, mma, kt0, kt1, acc);");
  } else {  // the producer warpgroup returns here
    b.line("if (!G::mainloop(G::aligned(kc_smem), load_a, load_b, mma, kt0, kt1, acc)) return;");
  }
}

void emit_split_k_reduction(TcKernel& k) {
  const ContractionConfig& cfg = k.L.cfg;
  if (cfg.split_k < 2) return;
  // contraction_splitk.cuh: every split stores its partial tile, the last to arrive sums them.
  std::string ws = k.a.scratch(false, Dim(0)), cnt = k.a.scratch(true, Dim(0));
  k.body.line("if (!kc_split_k_reduce<{}, {}, {}>(acc, {}, {}, tid)) return;", cfg.split_k,
              cfg.bm * cfg.bn, k.L.threads, ws, cnt);
}

}  // namespace kiln::contraction
