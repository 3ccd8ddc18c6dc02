// The CPU reference's per-op kernels (runtime/reference_*.cpp). Every tensor is a logical
// row-major f64 array with a concrete shape; the executor (runtime/reference.cpp) rounds each
// output to its dtype after the kernel ran.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::ref {

using Dims = std::vector<int64_t>;

// One node's evaluation. `out` holds numel(out_shape) values, zero-filled on entry.
//
// Each value is an 8-byte slot: an f64 for floating tensors, an exact int64 (bool 0/1) stored
// bit for bit for integer and bool tensors (int_slot / slot_int), so i64 values beyond 2^53
// stay exact. Movement copies slots whatever they hold; pointwise ops read each slot by its
// tensor's dtype.
struct NodeArgs {
  const Node& node;
  const std::string& where;  // "node 'conv1' (conv2d)" for messages
  std::vector<const double*> in;
  std::vector<Dims> in_shapes;
  double* out;
  Dims out_shape;
  int threads;  // already resolved (>= 1)
  std::vector<DType> in_dtypes;
  DType out_dtype = DType::F32;
  // Every output (out and out_shape are the first): split has several.
  std::vector<double*> outs;
  std::vector<Dims> out_shapes;
};

inline double int_slot(int64_t v) {
  double d;
  std::memcpy(&d, &v, sizeof d);
  return d;
}
inline int64_t slot_int(double d) {
  int64_t v;
  std::memcpy(&v, &d, sizeof v);
  return v;
}

inline int64_t numel(const Dims& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
// Product of s[b, e).
inline int64_t span_numel(const Dims& s, size_t b, size_t e) {
  int64_t n = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) n *= s[i];
  return n;
}

// Row-major element strides of a concrete shape.
inline Dims row_major_strides(const Dims& s) {
  Dims st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// Strides of `in` (row-major) seen through numpy broadcasting to `out` (same or higher rank,
// aligned right): 0 where `in` has size 1 or no dim at all.
inline Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims st(out.size(), 0);
  Dims rs = row_major_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : rs[i];
  return st;
}

// Pointwise ops, from the op table's f64 math with numpy broadcasting (reference.cpp).
void pointwise(const NodeArgs& a);
// Movement and reductions (reference.cpp).
void reshape(const NodeArgs& a);
void transpose(const NodeArgs& a);
void pad(const NodeArgs& a);
void reduce(const NodeArgs& a);  // reduce_* (sum, mean, max, min, l2, prod)
void cumsum(const NodeArgs& a);
// The byte-moving movement ops and pad's reflect and edge modes (reference_movement.cpp).
void concat(const NodeArgs& a);
void split(const NodeArgs& a);
void slice(const NodeArgs& a);
void expand(const NodeArgs& a);
void tile(const NodeArgs& a);
void depth_to_space(const NodeArgs& a);
void space_to_depth(const NodeArgs& a);
void trilu(const NodeArgs& a);
// resize, nearest and linear (reference_resize.cpp).
void resize(const NodeArgs& a);
void pad_mirror(const NodeArgs& a);  // pad with mode reflect or edge
// The index-driven movement ops (reference_gather.cpp): indices out of range are user errors.
void gather(const NodeArgs& a);
void gather_elements(const NodeArgs& a);
// Contractions and windows (reference_conv.cpp).
void conv2d(const NodeArgs& a);
void conv_transpose2d(const NodeArgs& a);
void matmul(const NodeArgs& a);
void pool2d(const NodeArgs& a);  // maxpool2d, avgpool2d
void global_avgpool(const NodeArgs& a);
// Index ops (reference_index.cpp).
void arg_reduce(const NodeArgs& a);  // argmax, argmin
void range(const NodeArgs& a);
// Normalizations (reference_norm.cpp).
void batchnorm(const NodeArgs& a);
void lastdims_norm(const NodeArgs& a);  // layernorm, rmsnorm
void channel_norm(const NodeArgs& a);   // groupnorm, instancenorm
void softmax(const NodeArgs& a);        // softmax, log_softmax
// Ragged-batch attention (reference_attention.cpp): bad offsets are user errors.
void attention_varlen(const NodeArgs& a);

}  // namespace kiln::ref
