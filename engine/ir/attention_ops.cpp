// The row and shape inference of attention_varlen (engine/ir/attention_ops.hpp).
#include "engine/ir/attention_ops.hpp"

#include <cmath>

#include "engine/base/check.hpp"

namespace kiln {
namespace {

constexpr const char* kOperand[] = {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_k"};

// Operand i is a rank-3 floating tensor [tokens, heads, dim] with static heads and dim.
void check_token_operand(const InferArgs& a, size_t i) {
  const TensorDesc& d = in(a, i);
  KILN_CHECK(is_float(d.dtype),
             "{}.inputs[{}]: attention_varlen's {} must be floating, got {} '{}'", a.where, i,
             kOperand[i], dtype_name(d.dtype), in_name(a, i));
  KILN_CHECK(d.rank() == 3,
             "{}.inputs[{}]: attention_varlen's {} '{}' must be [tokens, heads, head_dim] (rank "
             "3), found {}",
             a.where, i, kOperand[i], in_name(a, i), shape_str(d.shape));
  KILN_CHECK(d.shape[1].is_static() && d.shape[2].is_static(),
             "{}.inputs[{}]: attention_varlen's {} '{}' {}: heads and head_dim must be static",
             a.where, i, kOperand[i], in_name(a, i), shape_str(d.shape));
  KILN_CHECK(d.shape[1].value() > 0 && d.shape[2].value() > 0,
             "{}.inputs[{}]: attention_varlen's {} '{}' {} has no heads or an empty head_dim",
             a.where, i, kOperand[i], in_name(a, i), shape_str(d.shape));
  KILN_CHECK(d.dtype == in(a, 0).dtype,
             "{}.inputs[{}]: attention_varlen's {} '{}' is {} but q '{}' is {} (insert a cast)",
             a.where, i, kOperand[i], in_name(a, i), dtype_name(d.dtype), in_name(a, 0),
             dtype_name(in(a, 0).dtype));
}

// Operand i holds B + 1 cumulative i32 offsets.
void check_offsets(const InferArgs& a, size_t i) {
  const TensorDesc& d = in(a, i);
  KILN_CHECK(d.dtype == DType::I32,
             "{}.inputs[{}]: attention_varlen's {} must be i32 offsets, got {} '{}' (insert a "
             "cast)",
             a.where, i, kOperand[i], dtype_name(d.dtype), in_name(a, i));
  KILN_CHECK(d.rank() == 1, "{}.inputs[{}]: attention_varlen's {} '{}' must be [B + 1], found {}",
             a.where, i, kOperand[i], in_name(a, i), shape_str(d.shape));
  KILN_CHECK(!d.shape[0].is_static() || d.shape[0].value() >= 1,
             "{}.inputs[{}]: attention_varlen's {} '{}' {} needs at least one offset", a.where, i,
             kOperand[i], in_name(a, i), shape_str(d.shape));
}

// [Tq, Hq, Dv] of q's dtype.
std::vector<TensorDesc> infer_attention_varlen(const InferArgs& a) {
  for (size_t i = 0; i < 3; ++i) check_token_operand(a, i);
  check_offsets(a, kVarlenCuQ);
  check_offsets(a, kVarlenCuK);
  const Shape &q = in(a, 0).shape, &k = in(a, 1).shape, &v = in(a, 2).shape;
  KILN_CHECK(q[2] == k[2], "{}.inputs[1]: the head_dim of k '{}' {} must equal that of q '{}' {}",
             a.where, in_name(a, 1), shape_str(k), in_name(a, 0), shape_str(q));
  KILN_CHECK(k[0] == v[0] && k[1] == v[1],
             "{}.inputs[2]: v '{}' {} must have the tokens and heads of k '{}' {}", a.where,
             in_name(a, 2), shape_str(v), in_name(a, 1), shape_str(k));
  KILN_CHECK(q[1].value() % k[1].value() == 0,
             "{}.inputs[1]: q's {} heads are not a multiple of k's {} (grouped-query attention "
             "needs Hq % Hkv == 0)",
             a.where, q[1].value(), k[1].value());
  const Dim &bq = in(a, kVarlenCuQ).shape[0], &bk = in(a, kVarlenCuK).shape[0];
  KILN_CHECK(bq == bk,
             "{}.inputs[4]: cu_seqlens_k '{}' [{}] must have as many offsets as cu_seqlens_q '{}' "
             "[{}] (one sequence each)",
             a.where, in_name(a, 4), bk.str(), in_name(a, 3), bq.str());
  const VarlenBand band = varlen_band(a.node, q[2].value());
  KILN_CHECK(std::isfinite(band.scale), "{}.scale: must be finite, got {}", a.where, band.scale);
  for (const char* w : {"window_left", "window_right"})
    KILN_CHECK(a.node.attr_int(w) >= -1, "{}.{}: -1 (none) or a key count >= 0, got {}", a.where, w,
               a.node.attr_int(w));
  KILN_CHECK(a.node.attr_int("causal") == 0 || a.node.attr_int("causal") == 1,
             "{}.causal: 0 or 1, got {}", a.where, a.node.attr_int("causal"));
  TensorDesc o;
  o.dtype = in(a, 0).dtype;
  o.shape = {q[0], q[1], v[2]};
  o.layout = Layout::NCHW;
  return {o};
}

}  // namespace

std::vector<OpInfo> attention_rows() {
  OpInfo r{OpKind::AttentionVarlen,
           "attention_varlen",
           OpCategory::Attention,
           FusionRole::Anchor,
           5,
           5,
           {{"scale", AttrKind::Float, AttrValue(0.0)},
            {"causal", AttrKind::Int, AttrValue(int64_t{0})},
            {"window_left", AttrKind::Int, AttrValue(int64_t{-1})},
            {"window_right", AttrKind::Int, AttrValue(int64_t{-1})}},
           infer_attention_varlen};
  r.positional_dtypes = true;  // q, k, v floating and the offsets i32: checked by the inference
  return {r};
}

VarlenBand varlen_band(const Node& n, int64_t head_dim) {
  VarlenBand b;
  const double s = n.attr_float("scale");
  b.scale = s == 0.0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : s;
  b.causal = n.attr_int("causal") != 0;
  b.left = n.attr_int("window_left");
  b.right = n.attr_int("window_right");
  if (b.causal) b.right = b.right >= 0 ? std::min<int64_t>(b.right, 0) : 0;
  return b;
}

}  // namespace kiln
