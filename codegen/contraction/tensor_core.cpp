// The tensor-core kernels' driver: the problem as a GEMM, its layout (heuristics/
// contraction_layout.hpp), then the emitter of the layout's mainloop, assembled into one kernel.
#include "codegen/contraction/tensor_core.hpp"
#include "codegen/kernel_assembly.hpp"

namespace kiln::contraction {
namespace {

void emit_mainloop(TcKernel& k) {
  switch (k.L.mainloop) {
    case ContractionMainloop::MmaSync:
      return emit_mma_sync(k);
    case ContractionMainloop::WgmmaCpAsync:
      return emit_wgmma_cpasync(k);
    case ContractionMainloop::WgmmaWarpSpecialized:
      return emit_wgmma_warp_specialized(k);
    case ContractionMainloop::WgmmaTma:
      return emit_wgmma_tma(k);
  }
}

// The device files the kernel includes, then its own device code (tile typedef, instruction).
std::string device_code(const TcKernel& k) {
  std::string device = device_preamble() + device_text("contraction_mma.cuh") + "\n";
  if (k.L.arch_specific) device += device_text("contraction_wgmma.cuh") + "\n";
  if (k.L.tile_in_smem()) device += device_text("contraction_epilogue_tile.cuh") + "\n";
  if (k.L.cfg.split_k > 1) device += device_text("contraction_splitk.cuh") + "\n";
  return device + k.device.str();
}

// The grid: (M tiles or pixel blocks, N tiles, batch or splits), N tiles fastest in a 1-D grid
// where the layout says; split-K's workspace and counters per output tile.
void set_grid(const TcKernel& k, KernelSpec* ks) {
  const ContractionLayout& L = k.L;
  const ContractionConfig& cfg = L.cfg;
  ks->grid = {(k.v.gm + Dim(cfg.bm - 1)) / Dim(cfg.bm), (k.v.gn + Dim(cfg.bn - 1)) / Dim(cfg.bn),
              k.v.gbatch};
  if (L.pixel_blocks) ks->grid[0] = k.p.conv.n * Dim(L.pixel_tiles_h * L.pixel_tiles_w);
  if (L.n_fast) {
    ks->grid[0] = ks->grid[0] * Dim(L.tiles_n);
    ks->grid[1] = Dim(1);
  }
  if (cfg.split_k > 1) {
    ks->grid[2] = Dim(cfg.split_k);
    Dim tiles = ks->grid[0] * ks->grid[1];
    for (KernelArg& ka : ks->args) {
      if (ka.kind == KernelArg::Kind::Scratch)
        ka.value = tiles * Dim(int64_t{cfg.split_k} * cfg.bm * cfg.bn * 4);
      if (ka.kind == KernelArg::Kind::Counters) ka.value = tiles;
    }
  }
}

}  // namespace

KernelSpec emit_mma(const Problem& p_in, const ContractionConfig& cfg, int sm) {
  const Problem p = fold_matmul_batch(p_in);
  const Graph& g = *p.graph;
  ArgList a;
  const GemmView v = gemm_view(p, a);
  const ContractionLayout L = contraction_layout(layout_shape(p, v, a), cfg, sm);
  const std::string name = v.name + "_" + L.cfg.str() + epilogue_suffix(p);
  const std::string m_code = a.dim(v.gm), n_code = a.dim(v.gn);
  // Kernel parameters are numbered in the order of first use: the epilogue tile's checks read
  // the outputs' strides, and those of the tile's tensors, here.
  if (L.tile_eligible) (void)outputs_pair_storable(p, a);
  for (int t : {L.residual, L.tma_store}) {
    if (t < 0) continue;
    stride_code(a, g.tensor(t).desc);
    stride_code(a, g.tensor(p.y).desc);
  }
  TcKernel k{p, L, v, a, m_code, n_code, Writer(), Writer()};
  emit_mainloop(k);

  KernelSpec ks;
  ks.name = name;
  ks.entry = name;
  ks.source = assemble_kernel(device_code(k), {name, std::to_string(L.threads), 0, 0, a.params()},
                              k.body.str());
  ks.args = a.args();
  set_grid(k, &ks);
  ks.block = {L.threads, 1, 1};
  ks.smem_bytes = L.smem_bytes;
  if (L.arch_specific) ks.arch = "sm_90a";
  ks.bytes_moved = bytes_moved(p);
  ks.flops = flops(p);
  ks.group = p.group->id;
  return ks;
}

}  // namespace kiln::contraction
