// Movement ops that move nothing (engine/passes/identity_movements.cpp): Swin's pad of the map to
// a multiple of its window and its crop back, when the map is such a multiple already, are their
// inputs; every other pad and slice stays.
#include <gtest/gtest.h>

#include <memory>

#include "engine/passes/passes.hpp"
#include "kiln/graph.hpp"
#include "tests/count_ops.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::count_op;

TEST(IdentityMovements, SwinsPadAndCropGo) {
  auto g = std::make_shared<Graph>("swin_pad_crop");
  Tensor x = g->input("x", DType::F32, {"N", 6, 6, 8});
  Tensor p = g->pad(x, {0, 0, 0, 0, 0, 0, 0, 0});
  Tensor a = g->relu(p);
  g->output(g->sigmoid(g->slice(a, {0, 0}, {6, 6}, {1, 2})));
  Graph c = *g;
  std::vector<std::string> dropped;
  EXPECT_EQ(drop_identity_movements(c, &dropped), 2);
  EXPECT_EQ(count_op(c, OpKind::Pad), 0);
  EXPECT_EQ(count_op(c, OpKind::Slice), 0);
  EXPECT_EQ(dropped.size(), 2u);
  test::expect_same_values(*g, c);
}

TEST(IdentityMovements, WhatMovesStays) {
  auto g = std::make_shared<Graph>("g");
  Tensor x = g->input("x", DType::F32, {"N", 6, 6, 8});
  g->output(g->pad(x, {0, 1, 0, 0, 0, 1, 0, 0}));        // a real pad
  g->output(g->slice(g->relu(x), {0}, {5}, {1}));        // a crop
  g->output(g->slice(g->abs(x), {5}, {-7}, {1}, {-1}));  // every element, reversed
  g->output(g->slice(g->neg(x), {0}, {6}, {2}));         // all of it, but a graph output
  EXPECT_FALSE(has_identity_movement(*g));
  Graph c = *g;
  EXPECT_EQ(drop_identity_movements(c), 0);
}

}  // namespace
}  // namespace kiln
