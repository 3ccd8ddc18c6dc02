// Encodes a kernel's KernelArg::Kind::TensorMap argument for concrete bindings and the tensor's
// device pointer (the executor and the kernel timer launch the same kernels).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "runtime/cuda_driver.hpp"

namespace kiln::cuda {

// Host storage of one CUtensorMap (the driver wants it 64-byte aligned).
struct alignas(64) TensorMapBytes {
  uint64_t v[16];
};

inline void encode_kernel_tensor_map(TensorMapBytes* out, const KernelArg& a, DType dtype,
                                     uint64_t ptr, const Bindings& b) {
  const uint64_t es = static_cast<uint64_t>(dtype_size(dtype));
  std::vector<uint64_t> dims, strides;
  std::vector<uint32_t> box, estr;
  for (const Dim& d : a.map_dims) dims.push_back(static_cast<uint64_t>(d.eval(b)));
  for (const Dim& d : a.map_strides) strides.push_back(static_cast<uint64_t>(d.eval(b)) * es);
  for (int v : a.map_box) box.push_back(static_cast<uint32_t>(v));
  for (int v : a.map_elem_strides) estr.push_back(static_cast<uint32_t>(v));
  ptr += static_cast<uint64_t>(a.map_offset.eval(b)) * es;
  if (!a.map_im2col.empty()) {
    const std::vector<int>& i = a.map_im2col;
    const int lower[2] = {i[0], i[1]}, upper[2] = {i[2], i[3]};
    encode_im2col_tensor_map(out->v, dtype, ptr, dims, strides, estr, lower, upper,
                             static_cast<uint32_t>(i[4]), static_cast<uint32_t>(i[5]));
    return;
  }
  encode_tensor_map(out->v, dtype, ptr, dims, strides, box, estr, a.map_swizzle);
}

}  // namespace kiln::cuda
