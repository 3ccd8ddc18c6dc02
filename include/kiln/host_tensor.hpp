// A tensor in host memory: dtype, concrete logical shape, element strides and bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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

// A constant's data: held, or made on first use (a seeded random init, a tensor of a safetensors
// file), so that loading and checking a graph allocate nothing that only running it needs.
// Reads like a std::optional<HostTensor>. Copies share the data (made once, thread-safe); a
// mutable access gives the copy its own.
class LazyHostTensor {
 public:
  LazyHostTensor() = default;
  LazyHostTensor(std::nullopt_t) {}  // NOLINT: like std::optional
  LazyHostTensor(HostTensor t);      // NOLINT: `info.data = tensor`
  // Data that `make` produces on the first access. An exception from `make` reaches that access
  // (and the next one tries again).
  static LazyHostTensor deferred(std::function<HostTensor()> make);

  bool has_value() const { return state_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  // False for deferred data not made yet.
  bool materialized() const;
  const HostTensor& value() const;
  const HostTensor& operator*() const { return value(); }
  const HostTensor* operator->() const { return &value(); }
  HostTensor& operator*() { return mutable_value(); }
  HostTensor* operator->() { return &mutable_value(); }
  void reset() { state_.reset(); }

 private:
  struct State;
  HostTensor& mutable_value();
  std::shared_ptr<State> state_;
};

// Decodes/encodes one element of a dtype from/to raw storage (round-to-nearest-even).
double load_element(DType t, const std::byte* p);
void store_element(DType t, std::byte* p, double v);
// Rounds a value through a dtype (what storing and reloading it gives).
double round_to(DType t, double v);

}  // namespace kiln
