// The op names. Each name here has exactly one row in engine/op_table.cpp, which gives its
// category, arity, attributes, shape inference, reference math and CUDA expression; the builder
// methods, JSON names, CPU reference and codegen are all driven from that row.
#pragma once

#include <cstdint>

// X(Enum, json_name)
// clang-format 14 does not settle on X-macro lists: laid out by hand.
// clang-format off
#define KILN_UNARY_OPS(X)   \
  X(Relu, relu)             \
  X(LeakyRelu, leaky_relu)  \
  X(Elu, elu)               \
  X(Gelu, gelu)             \
  X(Silu, silu)             \
  X(Sigmoid, sigmoid)       \
  X(Tanh, tanh)             \
  X(Softplus, softplus)     \
  X(Clamp, clamp)           \
  X(Exp, exp)               \
  X(Log, log)               \
  X(Sqrt, sqrt)             \
  X(Rsqrt, rsqrt)           \
  X(Abs, abs)               \
  X(Neg, neg)               \
  X(Reciprocal, reciprocal) \
  X(Erf, erf)               \
  X(Identity, identity)     \
  X(Cast, cast)             \
  X(HardSwish, hardswish)   \
  X(HardSigmoid, hardsigmoid) \
  X(Mish, mish)             \
  X(Sin, sin)               \
  X(Cos, cos)

#define KILN_BINARY_OPS(X) \
  X(Add, add)              \
  X(Sub, sub)              \
  X(Mul, mul)              \
  X(Div, div)              \
  X(Max, max)              \
  X(Min, min)              \
  X(Pow, pow)              \
  X(Prelu, prelu)

#define KILN_STRUCTURED_OPS(X)     \
  X(Conv2d, conv2d)                \
  X(Matmul, matmul)                \
  X(Batchnorm, batchnorm)          \
  X(Layernorm, layernorm)          \
  X(Rmsnorm, rmsnorm)              \
  X(Groupnorm, groupnorm)          \
  X(Instancenorm, instancenorm)    \
  X(Softmax, softmax)              \
  X(ReduceSum, reduce_sum)         \
  X(ReduceMean, reduce_mean)       \
  X(ReduceMax, reduce_max)         \
  X(ReduceMin, reduce_min)         \
  X(Maxpool2d, maxpool2d)          \
  X(Avgpool2d, avgpool2d)          \
  X(GlobalAvgpool, global_avgpool) \
  X(Reshape, reshape)              \
  X(Transpose, transpose)          \
  X(Pad, pad)                      \
  X(Concat, concat)                \
  X(Split, split)                  \
  X(Slice, slice)                  \
  X(Expand, expand)                \
  X(Tile, tile)                    \
  X(DepthToSpace, depth_to_space)  \
  X(SpaceToDepth, space_to_depth)  \
  X(Trilu, trilu)                  \
  X(LogSoftmax, log_softmax)       \
  X(ReduceL2, reduce_l2)           \
  X(ReduceProd, reduce_prod)       \
  X(Cumsum, cumsum)                \
  X(Resize, resize)                \
  X(ConvTranspose2d, conv_transpose2d) \
  X(ArgMax, argmax)                \
  X(ArgMin, argmin)                \
  X(Range, range)                  \
  X(Gather, gather)                \
  X(GatherElements, gather_elements) \
  X(AttentionVarlen, attention_varlen)

// Integer / bool ops: comparisons (bool results), logical ops (bool operands), where, mod. No
// builder methods of their own (and, or, xor, not are C++ keywords): add_node1("lt", {a, b}).
#define KILN_INT_BOOL_OPS(X) \
  X(Mod, mod)                \
  X(Eq, eq)                  \
  X(Ne, ne)                  \
  X(Lt, lt)                  \
  X(Le, le)                  \
  X(Gt, gt)                  \
  X(Ge, ge)                  \
  X(And, and)                \
  X(Or, or)                  \
  X(Xor, xor)                \
  X(Not, not)                \
  X(Where, where)

#define KILN_ALL_OPS(X) \
  KILN_UNARY_OPS(X) KILN_BINARY_OPS(X) KILN_STRUCTURED_OPS(X) KILN_INT_BOOL_OPS(X)
// clang-format on

namespace kiln {

enum class OpKind : uint16_t {
#define KILN_X(E, n) E,
  KILN_ALL_OPS(KILN_X)
#undef KILN_X
      Count
};

// Fusion legality is decided from these, never from op lists.
enum class OpCategory : uint8_t {
  Pointwise,      // elementwise, broadcasting
  Reduction,      // reduce_* over axes
  Normalization,  // row/group statistics then elementwise: norms, softmax
  Contraction,    // conv2d, matmul
  Window,         // pooling: a reduction over a sliding window
  Movement,       // reshape, transpose, pad
  Scan,           // cumsum: a running reduction along one axis, one output per input element
  Attention,      // attention_varlen: softmax(Q K^T) V over ragged sequences, a kernel of its own
};

const char* op_name(OpKind k);
const char* category_name(OpCategory c);

}  // namespace kiln
