// 1-D convs channels-last (engine/passes/conv1d_layouts.cpp): Whisper's stem (two conv1d + gelu
// over frames, then the transpose to tokens) runs tensor-core convs with views between them.
#include <gtest/gtest.h>

#include <memory>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/engine.hpp"
#include "kiln/graph.hpp"
#include "tests/same_values.hpp"
#include "tests/whisper_stem.hpp"

namespace kiln {
namespace {

TEST(Conv1dLayouts, WhisperStemRunsChannelsLastConvsWithViewsBetween) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto g = test::whisper_stem(dt, 40);
    std::string note;
    auto f = apply_engine_passes(g, true, &note);
    EXPECT_NE(note.find("1-D convs channels-last (tensor-core convs): "), std::string::npos)
        << note;
    Plan p = plan_fusion(*f);
    CodegenOptions co;
    co.sm = 90;
    int copies = 0, convs = 0;
    for (const KernelSpec& k : generate_kernels(*f, p, co)) {
      copies += k.name.rfind("copy", 0) == 0;
      if (k.name.rfind("conv", 0) == 0) {
        ++convs;
        EXPECT_NE(k.name.find("_nhwc_"), std::string::npos) << k.name;
        EXPECT_EQ(k.name.find("simt"), std::string::npos) << k.name;
      }
    }
    EXPECT_EQ(convs, 2) << plan_to_string(*f, p);
    // One copy: the row-major input transposed for the first conv; the reshapes between the
    // convs and the transpose to tokens are views, the gelus the convs' epilogues, the position
    // add the layernorm's prologue.
    EXPECT_EQ(copies, 1) << plan_to_string(*f, p);
    EXPECT_EQ(p.groups.size() -
                  std::count_if(p.groups.begin(), p.groups.end(),
                                [](const FusionGroup& grp) { return grp.kind == GroupKind::View; }),
              4u)
        << plan_to_string(*f, p);
    test::expect_same_values(*g, *f, 1e-2);
    EngineOptions o;
    o.arch = "sm_90";
    o.load_kernels = false;
    o.disk_cache = false;
    EXPECT_NO_THROW(Engine(o).compile(*g));
  }
}

TEST(Conv1dLayouts, OtherConvsStay) {
  // f32 (no tensor-core path to gain), and a depthwise conv1d (4 channels per group, no
  // tensor-core conv either) keep their layouts.
  EXPECT_FALSE(has_row_major_conv1d(*test::whisper_stem(DType::F32, 40)));
  auto g = std::make_shared<Graph>("dw");
  Tensor x = g->input("x", DType::F16, {"N", 16, 1, 40});
  Conv2dOptions o;
  o.groups = 4;
  Tensor w = g->constant_random("w", TensorDesc{DType::F16, {16, 4, 1, 3}, Layout::NCHW, {}},
                                "normal", 0, 0.3, 1);
  g->output(g->conv2d(x, w, {}, o));
  EXPECT_FALSE(has_row_major_conv1d(*g));
}

}  // namespace
}  // namespace kiln
