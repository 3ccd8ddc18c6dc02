// Linear resize's kernel (codegen/emit_resize.cpp); nearest resize is a gather copy
// (codegen/copy_source.cpp).
#pragma once

#include "codegen/emit.hpp"

namespace kiln {

bool is_linear_resize(const Node& node);
// The copy group `grp` that ends in a linear resize, after its prologue.
KernelSpec emit_resize_linear(const EmitContext& cx, const FusionGroup& grp);

}  // namespace kiln
