// Channels-last tokens (engine/passes/channels_last_tokens.cpp): ViT's patch embedding, an NHWC
// conv flattened to [N, C, H*W] and transposed to tokens [N, H*W, C], needs no copy kernel; the
// rewritten graph computes what the original does, and what must stay stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

int copies(const Graph& f) {
  Plan p = plan_fusion(f);
  return static_cast<int>(std::count_if(p.groups.begin(), p.groups.end(), [](const FusionGroup& g) {
    return g.kind == GroupKind::Copy;
  }));
}

std::shared_ptr<Graph> patch_embedding(bool graph_output_flat) {
  auto g = std::make_shared<Graph>("patches");
  Tensor x = g->input("x", DType::F16, {"N", 8, 16, 16}, Layout::NHWC);
  Tensor w = g->constant_random("w", TensorDesc{DType::F16, {32, 8, 4, 4}, Layout::NHWC, {}},
                                "normal", 0, 0.3, 5);
  Conv2dOptions o;
  o.stride = {4, 4};
  Tensor c = g->conv2d(x, w, {}, o);  // [N, 32, 4, 4] channels-last
  Tensor flat = g->reshape(c, {"N", 32, 16});
  if (graph_output_flat) g->output(flat);
  Tensor tokens = g->transpose(flat, {0, 2, 1});
  g->output(g->add_node1("layernorm", {tokens}, {}, "out"));
  return g;
}

TEST(ChannelsLastTokens, PatchEmbeddingIsAView) {
  auto g = patch_embedding(false);
  std::string note;
  auto f = apply_engine_passes(g, true, &note);
  EXPECT_NE(note.find("channels-last tokens read in place"), std::string::npos) << note;
  EXPECT_EQ(copies(*f), 0) << plan_to_string(*f, plan_fusion(*f));
  test::expect_same_values(*g, *f);
}

TEST(ChannelsLastTokens, OnlyPrivateFlattensOfChannelsLast) {
  {
    auto g = patch_embedding(true);  // the flattened tensor is a graph output
    Graph c = *g;
    EXPECT_EQ(channels_last_tokens(c), 0);
  }
  {  // row-major memory: the reshape is a view already
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8, 4, 4});
    g.output(g.relu(g.transpose(g.reshape(x, {"N", 8, 16}), {0, 2, 1})));
    EXPECT_EQ(channels_last_tokens(g), 0);
  }
  {  // another transpose
    Graph g;
    Tensor x = g.input("x", DType::F16, {"N", 8, 4, 4}, Layout::NHWC);
    g.output(g.relu(g.transpose(g.reshape(x, {"N", 8, 16}), {2, 0, 1})));
    EXPECT_EQ(channels_last_tokens(g), 0);
  }
}

}  // namespace
}  // namespace kiln
