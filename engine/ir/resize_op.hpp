// The resize op (ONNX Resize, opset 11-21; Upsample 7-9 imports as it): its op table row, shape
// inference and the coordinate arithmetic that the CPU reference and codegen share. Only the
// trailing spatial dims of an [N, C, spatial...] tensor (1 to 3 of them) resize; the source
// coordinates are computed in f32, as onnxruntime computes them, so that nearest picks the same
// element on every backend.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/op_table.hpp"

namespace kiln {

// The op table row (engine/ir/op_table.cpp adds it at the end).
std::vector<OpInfo> resize_rows();

enum class ResizeCoord : uint8_t { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric };
enum class ResizeNearest : uint8_t { PreferFloor, PreferCeil, Floor, Ceil };

struct ResizeSpec {
  bool linear = false;  // else nearest
  ResizeCoord coord = ResizeCoord::HalfPixel;
  ResizeNearest nearest = ResizeNearest::PreferFloor;
};
ResizeSpec resize_spec(const Node& n);

// The first resized dim: N and C stay.
constexpr int kResizeFirstSpatial = 2;

// The f32 scale of dim `d` that the coordinate map divides by: the `scales` entry, or out / in
// (in f32) when the node gives `sizes`.
float resize_scale(const Node& n, size_t d, int64_t in, int64_t out);

// The input coordinate (continuous) of output coordinate `o` along a dim of size `in` -> `out`.
float resize_source(ResizeCoord c, int64_t o, float scale, int64_t in, int64_t out);

// Nearest: the input index of source coordinate `x` (rounded by `r`, clamped into [0, in)).
int64_t resize_nearest_index(ResizeNearest r, float x, int64_t in);

// Linear: the two neighbours of source coordinate `x` (clamped into [0, in - 1]) and the weight
// of the upper one (the lower one weighs 1 - w1).
struct ResizeTap {
  int64_t i0 = 0, i1 = 0;
  float w1 = 0.0f;
};
ResizeTap resize_linear_tap(float x, int64_t in);

}  // namespace kiln
