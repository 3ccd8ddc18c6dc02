// The tiled depthwise conv kernel's layout (codegen/contraction/depthwise_tiled.cpp): NHWC 16-bit
// activations, one input and one output channel per group, static output height and width. A
// CTA stages its input tile (the output tile's rows and columns plus the filter's halo, zero
// outside the image) of `nv` 8-channel vectors in shared memory by cp.async, once; each thread
// then slides along `pixels` consecutive output pixels of one output row for one 8-channel
// vector, reading shared memory only. A pure function of the shape, tested on the CPU.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

struct GroupedConvShape;

struct DepthwiseTile {
  bool ok = false;
  std::string why_not;         // when !ok: why the sliding-window kernel stays
  int nv = 0;                  // 8-channel vectors of the CTA (a divisor of C / 8)
  int pixels = 0;              // output pixels per thread, along the output row
  int tile_h = 0, tile_w = 0;  // output rows and columns of the CTA (tile_w = col_groups x pixels)
  int col_groups = 0;          // threads along the tile's row
  int threads = 0;             // nv x tile_h x col_groups
  int in_h = 0, in_w = 0;      // the input tile's rows and columns (with the halo)
  // 16-byte vectors per input tile row in shared memory: in_w x nv, padded so that the first
  // warp's reads of one tap hit distinct banks in each quarter warp.
  int pitch = 0;
  int64_t tiles_h = 0, tiles_w = 0;  // CTAs along the output's rows and columns (per image)
  int64_t smem_bytes = 0;            // the f32 filters, then the input tile
};

DepthwiseTile choose_depthwise_tile(const GroupedConvShape& s);

}  // namespace kiln
