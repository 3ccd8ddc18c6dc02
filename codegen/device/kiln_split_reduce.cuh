// kiln split reductions (codegen/emit_reduction.cpp's column tiles): the CTAs that share one
// tile of 32 outputs each hold a partial per output; warp 0 of each stores its partials to the
// workspace (slot `split` of the tile), and the last CTA of the tile to arrive (one counter per
// tile, reset to zero by that CTA, so counters stay zero between launches) reads all of them
// back in split order (a deterministic result) and finishes the outputs. Needs kiln_prelude.cuh.
// Guarded, not `#pragma once`: several kernels may be concatenated into one NVRTC program.
#ifndef KILN_SPLIT_REDUCE_CUH
#define KILN_SPLIT_REDUCE_CUH

KILN_DEVICE float kiln_ld_cg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}

KILN_DEVICE void kiln_st_cg(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;\n" ::"l"(p), "f"(v) : "memory");
}

// Called by all 32 lanes of warp 0 (lane = output within the tile). True in the last CTA.
KILN_DEVICE bool kiln_split_arrive(float* ws, unsigned* cnt, long long tile, long long split,
                                   long long tiles, unsigned splits, float acc, bool live) {
  const int lane = threadIdx.x & 31;
  if (live) kiln_st_cg(ws + (split * tiles + tile) * 32 + lane, acc);
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  __syncwarp();
  unsigned last = 0;
  if (lane == 0) {
    unsigned prev;
    asm volatile("atom.global.acq_rel.gpu.add.u32 %0, [%1], 1;\n"
                 : "=r"(prev)
                 : "l"(cnt + tile)
                 : "memory");
    last = prev == splits - 1u;
    if (last) cnt[tile] = 0u;
  }
  last = __shfl_sync(0xffffffffu, last, 0);
  if (last) asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  return last != 0;
}

// Partial `z` of this lane's output (in the last CTA, after kiln_split_arrive).
KILN_DEVICE float kiln_split_partial(const float* ws, long long tile, long long z,
                                     long long tiles) {
  return kiln_ld_cg(ws + (z * tiles + tile) * 32 + (threadIdx.x & 31));
}

#endif  // KILN_SPLIT_REDUCE_CUH
