// Tensor element types, layouts, and (possibly symbolic) dimensions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

// Floating types, then integer and boolean ones (indices, token ids, masks). Bool is one byte,
// 0 or 1.
enum class DType : uint8_t { F32, F16, BF16, I32, I64, Bool };

// Name used in graph files ("f32", "f16", "bf16", "i32", "i64", "bool") and the size of one
// element.
const char* dtype_name(DType t);
size_t dtype_size(DType t);
// The dtype classes that op rows accept (engine/ir/op_table.hpp).
inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}
inline bool is_integer(DType t) {
  return t == DType::I32 || t == DType::I64;
}
// Parses a graph-file dtype name; returns false for unknown names.
bool parse_dtype(const std::string& s, DType* out);

// How logical dimensions lie in memory. NCHW is row-major in logical order; NHWC moves dim 1
// innermost (for rank-4 tensors); Strided carries explicit element strides in the descriptor.
enum class Layout : uint8_t { NCHW, NHWC, Strided };
const char* layout_name(Layout l);

// Values bound to symbolic dimension names at run time ("N" -> 32).
using Bindings = std::map<std::string, int64_t>;

struct DimExpr;

// One dimension: a positive integer, a symbol ("N"), or an integer expression over symbols
// ("N*S", "S+1", "(H-1)/2+1": written in a graph file, or derived by shape inference). Expressions
// fold constants, so a dim over integers alone is always static, and are simplified to a
// canonical form, so that equal sizes compare equal however they were built (N*S*64/64 == N*S).
class Dim {
 public:
  Dim(int64_t v = 1);                           // NOLINT: implicit so that {1, 64, 56, 56} works
  Dim(int v) : Dim(static_cast<int64_t>(v)) {}  // NOLINT
  Dim(const char* sym);                         // NOLINT
  Dim(const std::string& sym);                  // NOLINT

  bool is_static() const { return expr_ == nullptr; }
  // The integer value; only for static dims (internal error otherwise).
  int64_t value() const;
  // True when this dim is a bare symbol; symbol() then returns its name.
  bool is_symbol() const;
  const std::string& symbol() const;
  // Canonical text: "64", "N", "N*S", "2*H+1", "(H+1)/2"; parse_dim reads it back.
  std::string str() const;
  // Evaluates with the bindings; throws a user error naming the unbound symbol.
  int64_t eval(const Bindings& b) const;
  // Collects the symbols this dim depends on.
  void symbols(std::vector<std::string>* out) const;

  friend bool operator==(const Dim& a, const Dim& b);
  friend bool operator!=(const Dim& a, const Dim& b) { return !(a == b); }
  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  // Floor division (dims are non-negative where it is used).
  friend Dim operator/(const Dim& a, const Dim& b);

 private:
  int64_t value_ = 1;
  std::shared_ptr<const DimExpr> expr_;
  friend struct DimExpr;
};

// Reads a dim from its text: integers, symbol names (letters, digits, _; not starting with a
// digit), + - * / (floor division) and parentheses, e.g. "N*S" or "(H-1)/2+1". Throws a user
// error "<where>: ..." naming the position of what it cannot read.
Dim parse_dim(const std::string& text, const std::string& where);

using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);
bool shape_is_static(const Shape& s);
// Product of dims (an expression when any dim is symbolic).
Dim shape_numel(const Shape& s);
std::vector<int64_t> eval_shape(const Shape& s, const Bindings& b);

// A tensor's type: dtype, logical shape and memory layout.
struct TensorDesc {
  DType dtype = DType::F32;
  Shape shape;
  Layout layout = Layout::NCHW;
  std::vector<int64_t> strides;  // element strides, only for Layout::Strided

  int rank() const { return static_cast<int>(shape.size()); }
  std::string str() const;  // "f16[N,64,56,56] NHWC"
};

// Element strides of a concrete shape under a layout (Strided returns the explicit strides).
std::vector<int64_t> layout_strides(const std::vector<int64_t>& shape, Layout layout,
                                    const std::vector<int64_t>& explicit_strides = {});

}  // namespace kiln
