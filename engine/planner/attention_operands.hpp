// How the attention kernel (attention_pattern.hpp) reads Q, K, V and writes O: through element
// strides and an offset over a tensor that is in memory. An operand made by a private chain of
// movement ops (reshape, transpose, slice: torchvision's head split of a QKV projection, whose
// symbolic batch dim in the middle keeps the copies from being views) is read through the chain
// composed into strides over the chain's input, when the composition is strided; the chain's
// nodes then join the attention group and never run. Likewise O, when a private chain of
// reshapes and transposes follows it (the head merge), is written through strides straight
// into the chain's result.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

// Element strides of a tensor with, for each, a static factor it is known to be a multiple of
// (0 for a dim of size 1, whose stride is never stepped).
struct Strides {
  std::vector<Dim> st;
  std::vector<int64_t> factor;
};

// The element strides of a tensor as laid out (dim_strides) with their static factors.
std::optional<Strides> strides_of(const TensorDesc& d);

struct Operand {
  int read = -1;           // the tensor the kernel reads (or writes, for O)
  Strides s;               // over the operand's dims
  Dim offset{0};           // elements into `read`, a multiple of 8
  std::vector<int> nodes;  // movement ops (and a mul) read through: they join the group
  double scale = 1.0;      // a private mul of Q or K by a scalar constant (torch's SDPA export
                           // scales each by sqrt(1 / sqrt(D))), folded into the scores
};

// Operand `t` of the chain: t itself, or read through its movement ops down to the last one that
// stayed a copy (views below it are read in place), after a private mul by a scalar constant when
// `may_scale` (Q and K). `private_only`: the walk stops at a tensor something else reads too
// (Swin V2's v slice of a head split whose q and k slices its cosine normalization reads: v is
// read from the split in place); else the chain may end in a tensor the other operands' chains
// read (torchvision's one QKV transpose), which the matcher checks.
std::optional<Operand> read_operand(const Graph& g, int t, bool may_scale,
                                    bool private_only = false);

// Where result `o` is written: o itself, or through the private reshapes and transposes that
// follow it up to the last one that stayed a copy, whose result is then written.
std::optional<Operand> write_result(const Graph& g, int o);

}  // namespace kiln
