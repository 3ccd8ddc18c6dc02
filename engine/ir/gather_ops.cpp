// Rows and shape inference of gather and gather_elements (ONNX semantics;
// engine/ir/gather_ops.hpp).
#include "engine/ir/gather_ops.hpp"

#include "engine/base/check.hpp"

namespace kiln {
namespace {

// The data (input 0) has rank >= 1, the indices (input 1) are i32 or i64; returns the axis.
int64_t check_operands(const InferArgs& a) {
  const TensorDesc& data = in(a, 0);
  const TensorDesc& idx = in(a, 1);
  const char* op = op_name(a.node.op);
  KILN_CHECK(data.rank() >= 1, "{}: input 0 ('{}') must be a tensor of rank >= 1, found {}",
             a.where, in_name(a, 0), data.str());
  KILN_CHECK(idx.dtype == DType::I32 || idx.dtype == DType::I64,
             "{}.inputs[1]: {} takes i32 or i64 indices, got {} '{}' (insert a cast)", a.where, op,
             dtype_name(idx.dtype), in_name(a, 1));
  const int r = data.rank();
  const int64_t axis = a.node.attr_int("axis");
  KILN_CHECK(axis >= -r && axis < r, "{}.axis: axis {} out of range for '{}' of rank {}", a.where,
             axis, in_name(a, 0), r);
  return axis < 0 ? axis + r : axis;
}

TensorDesc result(const TensorDesc& data, Shape shape) {
  TensorDesc o;
  o.dtype = data.dtype;
  o.shape = std::move(shape);
  o.layout = Layout::NCHW;
  return o;
}

// data[:axis] + indices.shape + data[axis+1:].
std::vector<TensorDesc> infer_gather(const InferArgs& a) {
  const int64_t axis = check_operands(a);
  const Shape& ds = in(a, 0).shape;
  Shape out(ds.begin(), ds.begin() + axis);
  const Shape& is = in(a, 1).shape;
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), ds.begin() + axis + 1, ds.end());
  return {result(in(a, 0), out)};
}

// The indices' shape; they have data's rank, and every dim but the axis fits data's.
std::vector<TensorDesc> infer_gather_elements(const InferArgs& a) {
  const int64_t axis = check_operands(a);
  const TensorDesc& data = in(a, 0);
  const TensorDesc& idx = in(a, 1);
  KILN_CHECK(idx.rank() == data.rank(),
             "{}.inputs[1]: the indices '{}' {} must have the rank of the data '{}' {} ({})",
             a.where, in_name(a, 1), shape_str(idx.shape), in_name(a, 0), shape_str(data.shape),
             data.rank());
  for (int d = 0; d < data.rank(); ++d) {
    if (d == axis) continue;
    const Dim& di = idx.shape[d];
    const Dim& dd = data.shape[d];
    const bool fits = di == dd || (di.is_static() && dd.is_static() && di.value() <= dd.value());
    KILN_CHECK(fits,
               "{}.inputs[1]: dim {} of the indices '{}' {} is {} but the data '{}' {} has {} "
               "there (only the axis {} may be larger)",
               a.where, d, in_name(a, 1), shape_str(idx.shape), di.str(), in_name(a, 0),
               shape_str(data.shape), dd.str(), axis);
  }
  return {result(data, idx.shape)};
}

OpInfo row(OpKind k, InferFn f) {
  OpInfo r{k,
           op_name(k),
           OpCategory::Movement,
           FusionRole::Movement,
           2,
           2,
           {{"axis", AttrKind::Int, AttrValue(int64_t{0})}},
           f};
  r.index_operand = true;
  return r;
}

}  // namespace

std::vector<OpInfo> gather_rows() {
  return {row(OpKind::Gather, infer_gather), row(OpKind::GatherElements, infer_gather_elements)};
}

int64_t gather_axis(const Node& n, int rank) {
  const int64_t axis = n.attr_int("axis");
  return axis < 0 ? axis + rank : axis;
}

bool gather_indices_in_range(const Graph& g, const Node& n) {
  if (!is_index_gather(n.op)) return false;
  const TensorDesc& data = g.tensor(n.inputs[0]).desc;
  const TensorInfo& it = g.tensor(n.inputs[1]);
  if (it.role != TensorRole::Constant || !it.data) return false;
  const Dim numel = shape_numel(it.desc.shape);
  if (!numel.is_static() || numel.value() > kMaxCheckedConstantIndices) return false;
  const Dim& axis_dim = data.shape[gather_axis(n, data.rank())];
  if (!axis_dim.is_static()) return false;
  const int64_t dim = axis_dim.value();
  for (int64_t v : it.data->to_i64())
    if (v < -dim || v >= dim) return false;
  return true;
}

}  // namespace kiln
