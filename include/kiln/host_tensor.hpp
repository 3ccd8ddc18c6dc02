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

  // From exact integers in row-major logical order (integer and bool tensors; a floating dtype
  // converts them).
  static HostTensor from_i64(DType dtype, std::vector<int64_t> shape, const std::vector<int64_t>& v,
                             Layout layout = Layout::NCHW);

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  bool is_row_major() const;
  // All elements in row-major logical order, widened to f64.
  // (An i64 value beyond 2^53 loses its low bits here: to_i64 is exact.)
  std::vector<double> to_f64() const;
  // All elements in row-major logical order as exact integers (floating values convert like a
  // cast: toward zero, NaN to 0, saturating).
  std::vector<int64_t> to_i64() const;
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
// Rounds a value through a dtype (what storing and reloading it gives). Integer dtypes take
// the cast rule: toward zero, NaN to 0, saturating; bool is v != 0.
double round_to(DType t, double v);
// Exact integer access to integer and bool storage (other dtypes convert as a cast does).
int64_t load_int(DType t, const std::byte* p);
void store_int(DType t, std::byte* p, int64_t v);
// The cast rule from a floating value to integer / bool dtype `t`: toward zero, NaN to 0,
// saturating at the type's range; bool is v != 0.
int64_t float_to_int(DType t, double v);
// An integer result stored in `t`: i32 wraps (two's complement), bool is v != 0.
int64_t wrap_int(DType t, int64_t v);
// An integer converted to floating dtype `t` as the kernels do (i64 -> f32 rounds once; 16-bit
// types then round again from f32). For integer `t`, the exact value as f64.
double int_to_double(DType t, int64_t v);

}  // namespace kiln
