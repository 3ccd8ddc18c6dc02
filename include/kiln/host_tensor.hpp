// A tensor in host memory: dtype, concrete logical shape, element strides and bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/types.hpp"

namespace kiln {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;    // logical
  std::vector<int64_t> strides;  // element strides into data
  std::vector<std::byte> data;

  // A zero-filled tensor laid out by `layout` (NCHW = row-major logical).
  static HostTensor zeros(DType dtype, std::vector<int64_t> shape, Layout layout = Layout::NCHW);
  // From f64 values in row-major logical order, rounded to dtype, stored in `layout`.
  static HostTensor from_f64(DType dtype, std::vector<int64_t> shape, const std::vector<double>& v,
                             Layout layout = Layout::NCHW);

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  bool is_row_major() const;
  // All elements in row-major logical order, widened to f64.
  std::vector<double> to_f64() const;
  // The same values re-laid out (row-major logical for NCHW).
  HostTensor relayout(Layout layout) const;
};

// Decodes/encodes one element of a dtype from/to raw storage (round-to-nearest-even).
double load_element(DType t, const std::byte* p);
void store_element(DType t, std::byte* p, double v);
// Rounds a value through a dtype (what storing and reloading it gives).
double round_to(DType t, double v);

}  // namespace kiln
