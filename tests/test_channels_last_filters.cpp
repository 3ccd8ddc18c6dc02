// The Engine pass that lays NCHW conv filters out NHWC for NHWC convs (engine/passes/passes.hpp:
// channels_last_filters): which filters, the values kept, sharing, and the kernels it unlocks.
#include <gtest/gtest.h>

#include <map>

#include "engine/passes/passes.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "kiln/reference.hpp"
#include "tests/count_ops.hpp"
#include "tests/random_input.hpp"

using namespace kiln;
using test::random_input;

using test::count_op;

// Two NHWC convs share an NCHW filter (one relaid copy), a third conv reads NCHW activations (its
// filter stays), a 1x1 filter given NHWC stays; the values are the same, so the reference agrees
// exactly; the 1x1 stride-1 conv over 64 channels then plans on the TMA loader (`_tma`), which
// reads NHWC filters only.
TEST(ChannelsLastFilters, NhwcConvsGetNhwcFilters) {
  auto g = std::make_shared<Graph>("filters");
  Tensor x = g->input("x", DType::F16, {"N", 64, 12, 10}, Layout::NHWC);
  Tensor xc = g->input("xc", DType::F32, {"N", 8, 6, 6}, Layout::NCHW);
  Tensor w =
      g->constant_random("w", {DType::F16, {64, 64, 3, 3}, Layout::NCHW, {}}, "normal", 0, 0.05, 1);
  Tensor w1 =
      g->constant_random("w1", {DType::F16, {64, 64, 1, 1}, Layout::NCHW, {}}, "normal", 0, 0.1, 2);
  Tensor wc =
      g->constant_random("wc", {DType::F32, {4, 8, 3, 3}, Layout::NCHW, {}}, "normal", 0, 0.2, 3);
  Conv2dOptions same;
  same.padding = {1, 1};
  Tensor a = g->conv2d(x, w, {}, same);
  Tensor b = g->conv2d(g->relu(a), w, {}, same);
  g->output(g->conv2d(g->relu(b), w1));
  g->output(g->conv2d(xc, wc));
  std::string note;
  std::shared_ptr<const Graph> f = apply_engine_passes(g, true, &note);
  EXPECT_NE(note.find("2 conv filters laid out NHWC as their inputs (KRSC)"), std::string::npos)
      << note;
  std::map<std::string, int> filters;
  for (const Node& n : f->nodes())
    if (n.op == OpKind::Conv2d) {
      const TensorInfo& t = f->tensor(n.inputs[1]);
      ++filters[t.name];
      const bool nhwc_x = f->tensor(n.inputs[0]).desc.layout == Layout::NHWC;
      EXPECT_EQ(t.desc.layout, nhwc_x ? Layout::NHWC : Layout::NCHW) << t.name;
    }
  EXPECT_EQ(filters["w_krsc"], 2);  // shared, relaid once
  EXPECT_EQ(filters["w1_krsc"], 1);
  EXPECT_EQ(filters["wc"], 1);
  EXPECT_EQ(f->find("w"), -1);  // pruned
  EXPECT_EQ(f->tensor(f->find("w_krsc")).data->to_f64(), g->tensor(g->find("w")).data->to_f64());
  std::map<std::string, HostTensor> in{
      {"x", random_input(DType::F16, {2, 64, 12, 10}, Layout::NHWC, 5)},
      {"xc", random_input(DType::F32, {2, 8, 6, 6}, Layout::NCHW, 6)}};
  auto want = run_reference(*g, in), got = run_reference(*f, in);
  for (const auto& [name, t] : want) EXPECT_EQ(t.to_f64(), got.at(name).to_f64()) << name;
  EXPECT_EQ(apply_engine_passes(f, true).get(), f.get());  // idempotent
  EXPECT_EQ(count_op(*f, OpKind::Conv2d), 4);
  // What the Engine compiles for sm_90 (no GPU: compiled, not loaded): the 1x1 conv on TMA.
  EngineOptions o;
  o.arch = "sm_90";
  o.load_kernels = false;
  o.disk_cache = false;
  bool tma_1x1 = false;
  std::string names;
  for (const KernelInfo& k : Engine(o).compile(*g).kernels()) {
    names += k.name + " ";
    tma_1x1 |=
        k.name.rfind("conv_f16_nhwc_1x1_", 0) == 0 && k.name.find("_tma") != std::string::npos;
  }
  EXPECT_TRUE(tma_1x1) << names;
}
