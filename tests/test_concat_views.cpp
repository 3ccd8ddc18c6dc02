// Concat elimination and strided views (engine/passes/concat_views.cpp, slice_views.cpp): which
// concats, slices and expands cost no kernel, where each view sits in its root (offset and
// strides), the plan the planner makes of them (golden groups), that the rewritten graph computes
// what the original does (CPU reference on fresh random inputs), and that every kernel compiles
// with NVRTC for sm_80 and sm_90 (sm_90a kernels among them).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "codegen/kernel_spec.hpp"
#include "engine/passes/passes.hpp"
#include "engine/planner/plan.hpp"
#include "kiln/engine.hpp"
#include "kiln/reference.hpp"
#include "runtime/memory_plan.hpp"
#include "tests/concat_view_graphs.hpp"
#include "tests/same_values.hpp"

namespace kiln {
namespace {

using test::expect_same_values;

using Groups = std::vector<std::vector<std::string>>;

struct Lowered {
  std::shared_ptr<const Graph> g;
  Plan plan;
  std::string note;
};

Lowered lower(const std::shared_ptr<Graph>& g) {
  Lowered l;
  l.g = apply_engine_passes(g, true, &l.note);
  l.plan = plan_fusion(*l.g);
  return l;
}

int count_kind(const Plan& p, GroupKind k) {
  return static_cast<int>(std::count_if(p.groups.begin(), p.groups.end(),
                                        [&](const FusionGroup& g) { return g.kind == k; }));
}

// Node names of each group with a kernel (views left out), in plan order.
Groups kernel_groups(const Graph& g, const Plan& p) {
  Groups r;
  for (const FusionGroup& grp : p.groups) {
    if (grp.kind == GroupKind::View) continue;
    std::vector<std::string> names;
    for (int n : grp.nodes) names.push_back(g.nodes()[n].name);
    r.push_back(names);
  }
  return r;
}

std::vector<std::string> view_nodes(const Graph& g, const Plan& p) {
  std::vector<std::string> r;
  for (const FusionGroup& grp : p.groups)
    if (grp.kind == GroupKind::View)
      for (int n : grp.nodes) r.push_back(g.nodes()[n].name);
  return r;
}

int tensor_id(const Graph& g, const std::string& name) {
  for (size_t t = 0; t < g.tensors().size(); ++t)
    if (g.tensors()[t].name == name) return static_cast<int>(t);
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

// Tensor `name` is a view of `root` at `offset`, laid out with `strides` (empty: dense).
void expect_view(const Graph& g, const std::string& name, const std::string& root,
                 const Dim& offset, const std::vector<int64_t>& strides) {
  const TensorInfo& t = g.tensor(tensor_id(g, name));
  EXPECT_EQ(t.view_of, tensor_id(g, root)) << name;
  EXPECT_EQ(t.view_offset, offset) << name << ": offset " << t.view_offset.str();
  EXPECT_EQ(t.desc.strides, strides) << name;
  if (t.view_of >= 0) EXPECT_EQ(g.tensor(t.view_of).view_of, -1) << "a root is never a view";
}

// Every kernel compiles (NVRTC, no device): sm_80, and sm_90 with its sm_90a kernels.
void expect_compiles(const Graph& g) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    EngineOptions o;
    o.arch = arch;
    o.load_kernels = false;
    o.disk_cache = false;
    EXPECT_NO_THROW(Engine(o).compile(g)) << arch;
  }
}

// No two roots the arena overlaps are live at once, and views take no memory of their own.
void expect_arena_sound(const Graph& g, const Plan& p) {
  CodegenOptions co;
  co.sm = 90;
  std::vector<KernelSpec> ks = generate_kernels(g, p, co);
  EXPECT_EQ(ks.size(), p.groups.size() - count_kind(p, GroupKind::View));
  ArenaPlan ap = plan_arena(g, ks, {{"N", 3}});
  for (const auto& [id, off] : ap.offset) EXPECT_LT(g.tensor(id).view_of, 0) << g.tensor(id).name;
}

std::string dname(DType dt) {
  return dtype_name(dt);
}

TEST(ConcatViews, DenseBlockWritesEveryFeatureIntoTheLastBuffer) {
  for (DType dt : {DType::F16, DType::F32}) {
    SCOPED_TRACE(dname(dt));
    auto g = test::dense_block(dt);
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_NE(
        l.note.find("concats eliminated (producers write into the concat buffer): cat2, cat1"),
        std::string::npos)
        << l.note;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
    EXPECT_EQ(view_nodes(f, l.plan), (std::vector<std::string>{"cat1", "cat2"}));
    // Every producer stores into cat2's buffer: conv0 (+relu) at channel 0, conv1 at 32, conv2 at
    // 48; cat1 is cat2's first 48 channels, read in place by bn2.
    const std::vector<int64_t> st = dt == DType::F16 ? std::vector<int64_t>{4096, 1, 512, 64}
                                                     : std::vector<int64_t>{4096, 64, 8, 1};
    expect_view(f, "relu0", "cat2", Dim(0), st);
    expect_view(f, "conv1", "cat2", Dim(dt == DType::F16 ? 32 : 32 * 64), st);
    expect_view(f, "cat1", "cat2", Dim(0), st);
    expect_view(f, "conv2", "cat2", Dim(dt == DType::F16 ? 48 : 48 * 64), st);
    EXPECT_EQ(
        kernel_groups(f, l.plan),
        (Groups{
            {"conv0", "relu0", "bn1", "relu1"}, {"conv1"}, {"bn2", "relu2"}, {"conv2"}, {"out"}}))
        << plan_to_string(f, l.plan);
    expect_same_values(*g, f);
    expect_arena_sound(f, l.plan);
  }
  expect_compiles(*test::dense_block(DType::F16));
  expect_compiles(*test::dense_block(DType::F32));
}

TEST(ConcatViews, ExportedDenseBlockSharesTheLastBuffer) {
  for (DType dt : {DType::F16, DType::F32}) {
    SCOPED_TRACE(dname(dt));
    auto g = test::dense_block_exported(dt);
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_NE(l.note.find("block with 2 prefix concats"), std::string::npos) << l.note;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
    EXPECT_EQ(view_nodes(f, l.plan), (std::vector<std::string>{"c2", "c3", "block"}));
    // The pool stores x0 into channels 0..31 (its kernel stores each element through the
    // strides; l1's batchnorm, which reads x0, leaves the pool's epilogue for a kernel of its
    // own); each layer's conv writes its 16 channels in place; c2 and c3 are the block's first
    // 48 and 64 channels.
    const int64_t hw = 64, c = dt == DType::F16 ? 1 : hw;
    const std::vector<int64_t> st = dt == DType::F16 ? std::vector<int64_t>{80 * hw, 1, 8 * 80, 80}
                                                     : std::vector<int64_t>{80 * hw, hw, 8, 1};
    expect_view(f, "maxpool2d_0", "block", Dim(0), st);
    expect_view(f, "l1", "block", Dim(32 * c), st);
    expect_view(f, "l2", "block", Dim(48 * c), st);
    expect_view(f, "l3", "block", Dim(64 * c), st);
    expect_view(f, "c2", "block", Dim(0), st);
    expect_view(f, "c3", "block", Dim(0), st);
    for (const char* n : {"c2", "c3", "block"}) {
      const Node& cn = *std::find_if(f.nodes().begin(), f.nodes().end(),
                                     [&](const Node& x) { return x.name == n; });
      EXPECT_EQ(f.tensor(cn.inputs[0]).name, "maxpool2d_0") << n;
    }
    EXPECT_EQ(kernel_groups(f, l.plan), (Groups{{"stem", "stem.relu"},
                                                {"maxpool2d_0"},
                                                {"l1.bn", "l1.relu"},
                                                {"l1"},
                                                {"l2.bn", "l2.relu"},
                                                {"l2"},
                                                {"l3.bn", "l3.relu"},
                                                {"l3"},
                                                {"t.bn", "t.relu"},
                                                {"out"}}))
        << plan_to_string(f, l.plan);
    expect_same_values(*g, f);
    expect_arena_sound(f, l.plan);
  }
  expect_compiles(*test::dense_block_exported(DType::F16));
  expect_compiles(*test::dense_block_exported(DType::F32));
}

TEST(ConcatViews, InceptionBranchesStoreInPlace) {
  auto g = test::inception_block(DType::F16);
  Lowered l = lower(g);
  const Graph& f = *l.g;
  EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
  EXPECT_EQ(view_nodes(f, l.plan), (std::vector<std::string>{"cat"}));
  const std::vector<int64_t> st{64 * 80, 1, 8 * 80, 80};
  expect_view(f, "b1.relu", "cat", Dim(0), st);
  expect_view(f, "b2.relu", "cat", Dim(16), st);
  expect_view(f, "b3.relu", "cat", Dim(48), st);
  expect_view(f, "b4.relu", "cat", Dim(64), st);
  expect_same_values(*g, f);
  expect_arena_sound(f, l.plan);
  expect_compiles(*g);
}

// Inception-v3's average-pool branch: the pool runs after its narrowing 1x1 conv and its
// kernel's epilogue (the conv's bias, the relu) stores into the concat in place.
TEST(ConcatViews, AveragePoolBranchStoresInPlaceFromThePool) {
  auto g = test::inception_block(DType::F16, {"N", 32, 8, 8}, true);
  Lowered l = lower(g);
  const Graph& f = *l.g;
  EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
  EXPECT_EQ(count_kind(l.plan, GroupKind::Pointwise), 0) << plan_to_string(f, l.plan);
  const std::vector<int64_t> st{64 * 80, 1, 8 * 80, 80};
  expect_view(f, "b4.relu", "cat", Dim(64), st);
  const Node& relu = *std::find_if(f.nodes().begin(), f.nodes().end(),
                                   [](const Node& n) { return n.name == "b4.relu"; });
  const int relu_index = static_cast<int>(&relu - f.nodes().data());
  for (const FusionGroup& grp : l.plan.groups)
    if (std::find(grp.nodes.begin(), grp.nodes.end(), relu_index) != grp.nodes.end())
      EXPECT_EQ(grp.kind, GroupKind::Window) << plan_to_string(f, l.plan);
  expect_same_values(*g, f, 2e-3);
  expect_arena_sound(f, l.plan);
  expect_compiles(*g);
}

TEST(ConcatViews, UnetSkipCopiesOnlyTheInputThePoolAlsoReads) {
  for (DType dt : {DType::F16, DType::F32}) {
    SCOPED_TRACE(dname(dt));
    auto g = test::unet_skip(dt);
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_NE(l.note.find("cat (1 of 2 inputs copied in)"), std::string::npos) << l.note;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
    // The upsampling conv_transpose2d writes channels 0..31 in place; enc.relu, which the pool
    // reads too, stays dense, and its copy into channels 32..63 (the identity cat.in1) is a second
    // store of the encoder conv's epilogue: no kernel of its own.
    const std::vector<int64_t> st = dt == DType::F16
                                        ? std::vector<int64_t>{256 * 64, 1, 16 * 64, 64}
                                        : std::vector<int64_t>{256 * 64, 256, 16, 1};
    expect_view(f, "up", "cat", Dim(0), st);
    expect_view(f, "cat.in1", "cat", Dim(dt == DType::F16 ? 32 : 32 * 256), st);
    EXPECT_EQ(f.tensor(tensor_id(f, "enc.relu")).view_of, -1);
    EXPECT_EQ(kernel_groups(f, l.plan), (Groups{{"enc", "enc.relu", "cat.in1"},
                                                {"maxpool2d_0"},
                                                {"mid", "mid.relu"},
                                                {"up"},
                                                {"dec", "out"}}))
        << plan_to_string(f, l.plan);
    expect_same_values(*g, f);
    expect_arena_sound(f, l.plan);
    expect_compiles(*g);
  }
}

TEST(ConcatViews, ShuffleUnitReadsItsHalfInPlace) {
  auto g = test::shuffle_unit(DType::F16);
  Lowered l = lower(g);
  const Graph& f = *l.g;
  // split.0 (the half that joins unchanged) is a view of x, copied into the concat by one
  // identity kernel; the branch writes its half in place; split.1 feeds a conv (a copy).
  const std::vector<int64_t> st{64 * 32, 1, 8 * 32, 32};
  expect_view(f, "split:0", "x", Dim(0), st);
  expect_view(f, "cat.in0", "cat", Dim(0), st);
  expect_view(f, "pw2.relu", "cat", Dim(16), st);
  EXPECT_EQ(f.tensor(tensor_id(f, "split:1")).view_of, -1);
  std::vector<std::string> views = view_nodes(f, l.plan);
  EXPECT_NE(std::find(views.begin(), views.end(), "cat"), views.end());
  EXPECT_NE(std::find(views.begin(), views.end(), "split.0"), views.end());
  // The copy-in reads its half of x and writes its place in the concat as 16-byte vectors (8
  // consecutive channels of a pixel, pixel stride 32), not element by element.
  CodegenOptions co;
  co.sm = 90;
  int copy_ins = 0;
  for (const KernelSpec& k : generate_kernels(f, l.plan, co)) {
    if (k.name != "pointwise_f16_identity") continue;
    ++copy_ins;
    EXPECT_NE(k.source.find("kiln_ldv(t_0 + "), std::string::npos) << k.source;
    EXPECT_NE(
        k.source.find("kiln_stv(t_1 + (base0 / 1024) * 2048 + (base0 % 16) + ((base0 / 128) % "
                      "8) * 256 + ((base0 / 16) % 8) * 32"),
        std::string::npos)
        << k.source;
  }
  EXPECT_EQ(copy_ins, 1);
  expect_same_values(*g, f);
  expect_arena_sound(f, l.plan);
  expect_compiles(*g);
}

TEST(ConcatViews, BatchConcatIsAnOffsetOfDenseMemory) {
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dname(dt));
    auto g = test::batch_concat(dt);
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
    // relu(x) at 0 and sigmoid(y) at N x 64 of cat, both dense row-major.
    expect_view(f, "rx", "cat", Dim(0), {});
    expect_view(f, "sy", "cat", Dim("N") * Dim(64), {});
    EXPECT_EQ(f.tensor(tensor_id(f, "sy")).desc.layout, Layout::NCHW);
    expect_same_values(*g, f);
    expect_arena_sound(f, l.plan);
    expect_compiles(*g);
  }
}

TEST(StridedViews, SlicesSplitsExpandsAndConstantGathersReadByElementwiseOpsAreViews) {
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dname(dt));
    auto g = test::slice_expand(dt);
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
    EXPECT_EQ(count_kind(l.plan, GroupKind::View), 7) << plan_to_string(f, l.plan);
    const Node& a = f.nodes()[0];
    ASSERT_EQ(a.op, OpKind::Slice);
    expect_view(f, f.tensor(a.outputs[0]).name, "x", Dim(0), {512, 64, 1});
    expect_view(f, f.tensor(f.nodes()[1].outputs[0]).name, "x", Dim(32), {512, 64, 1});
    expect_view(f, "split:0", "x", Dim(0), {512, 64, 1});
    expect_view(f, "split:1", "x", Dim(4 * 64), {512, 64, 1});
    EXPECT_EQ(f.tensor(tensor_id(f, "split:0")).desc.layout, Layout::Strided);
    const Node& e = *std::find_if(f.nodes().begin(), f.nodes().end(),
                                  [](const Node& n) { return n.op == OpKind::Expand; });
    expect_view(f, f.tensor(e.outputs[0]).name, "z", Dim(0), {64, 0, 1});
    // x[:, -2] drops the axis; x[:, [1, 3, 5]] steps it by 2.
    std::vector<const Node*> gathers;
    for (const Node& n : f.nodes())
      if (n.op == OpKind::Gather) gathers.push_back(&n);
    ASSERT_EQ(gathers.size(), 2u);
    expect_view(f, f.tensor(gathers[0]->outputs[0]).name, "x", Dim(6 * 64), {512, 1});
    expect_view(f, f.tensor(gathers[1]->outputs[0]).name, "x", Dim(64), {512, 128, 1});
    expect_same_values(*g, f);
    expect_arena_sound(f, l.plan);
    expect_compiles(*g);
  }
}

// A slice along the leading dim of dense memory is dense memory at an offset: a view whatever
// reads it (a reduction, a row norm), also once a reshape of it is a view (Swin V2's q and k of
// its head split: the reshapes take the slice's root and offset).
TEST(StridedViews, LeadingSlicesOfDenseMemoryAreViewsForAnyReader) {
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dname(dt));
    auto g = std::make_shared<Graph>("head_split");
    Tensor x = g->input("x", dt, {"N", 8, 96});
    Tensor split = g->transpose(g->reshape(x, {"N", 8, 3, 32}), {2, 0, 1, 3});  // [3, N, 8, 32]
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < 2; ++i)
      parts.push_back(g->reshape(g->slice(split, {i}, {i + 1}, {0}), {"N", 8, 32}));
    g->output(g->reduce("reduce_l2", parts[0], {-1}, true));
    g->output(g->softmax(parts[1], -1));
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 1) << plan_to_string(f, l.plan);  // the split
    const std::string root = g->tensor(split.id).name;
    for (int64_t i = 0; i < 2; ++i) {
      const Dim at = Dim(i) * Dim("N") * Dim(8 * 32);
      const Node& reshape = g->nodes()[g->tensor(parts[i].id).producer];
      expect_view(f, g->tensor(parts[i].id).name, root, at, {});
      expect_view(f, g->tensor(reshape.inputs[0]).name, root, at, {});  // the slice's result
    }
    expect_same_values(*g, f);
    expect_arena_sound(f, l.plan);
    expect_compiles(*g);
  }
}

TEST(StridedViews, RowNormsReadStridedRowsInPlace) {
  // Swin V2's head split: q and k read by row norms, v by a matmul, all in place in the QKV
  // projection's output ([N, 7, 3, 2, 32] -> [3, N, 2, 7, 32], sliced and squeezed): no copy.
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dname(dt));
    auto g = std::make_shared<Graph>("heads");
    Tensor x = g->input("x", dt, {"N", 7, 48});
    Tensor qkv = g->matmul(
        x, g->constant_random("w", {dt, {48, 192}, Layout::NCHW, {}}, "normal", 0, 0.2, 5));
    Tensor t = g->transpose(g->reshape(qkv, {"N", 7, 3, 2, 32}), {2, 0, 3, 1, 4});
    std::vector<Tensor> p;
    for (int64_t i = 0; i < 3; ++i)
      p.push_back(g->reshape(g->slice(t, {i}, {i + 1}, {0}), {"N", 2, 7, 32}));
    g->output(g->rmsnorm(p[0]));
    g->output(g->softmax(p[1]));
    g->output(g->matmul(g->input("a", dt, {"N", 2, 5, 7}), p[2]));
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 0) << plan_to_string(f, l.plan);
    EXPECT_NE(l.note.find("transpose read row by row"), std::string::npos) << l.note;
    const std::string root = g->tensor(qkv.id).name;
    for (int64_t i = 0; i < 3; ++i)  // [N, 2, 7, 32] at (i, head, token) strides (64, 192)
      expect_view(f, g->tensor(p[i].id).name, root, Dim(i * 64), {7 * 192, 32, 192, 1});
    CodegenOptions co;
    co.sm = 90;
    int strided_rows = 0;
    for (const KernelSpec& k : generate_kernels(f, l.plan, co))
      strided_rows +=
          k.name.rfind("rownorm", 0) == 0 && k.source.find(" + rb") != std::string::npos;
    EXPECT_EQ(strided_rows, 2);  // 16-byte vectors from each row's start
    expect_same_values(*g, f);
    expect_arena_sound(f, l.plan);
    expect_compiles(*g);
  }
  // An unpadding slice of H, then of W, read by a layernorm: one strided view, no copy. A row
  // of 60 f16 does not start 16 bytes aligned in every row: the slices stay copies there.
  for (int64_t c : {64, 60}) {
    SCOPED_TRACE(c);
    auto g = std::make_shared<Graph>("unpad");
    Tensor r = g->relu(g->input("x", DType::F16, {"N", 12, 12, c}));
    Tensor h = g->slice(g->slice(r, {0}, {10}, {1}), {0}, {10}, {2});
    g->output(g->layernorm(h));
    Lowered l = lower(g);
    const Graph& f = *l.g;
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), c == 64 ? 0 : 2) << plan_to_string(f, l.plan);
    if (c == 64)
      expect_view(f, g->tensor(h.id).name, g->tensor(r.id).name, Dim(0),
                  {12 * 12 * c, 12 * c, c, 1});
    expect_same_values(*g, f);
    expect_compiles(*g);
  }
}

TEST(ConcatViews, CopiesStayWhereAViewWouldNotDo) {
  // Inputs only: nothing writes in place, one concat kernel beats two copies.
  {
    auto g = std::make_shared<Graph>("inputs");
    Tensor a = g->input("a", DType::F32, {"N", 64});
    Tensor b = g->input("b", DType::F32, {"N", 64});
    g->output(test::cat(*g, {a, b}, 1, "out2"));
    Tensor c = test::cat(*g, {test::relu(*g, a, "ra"), b}, 1, "c");
    g->output(test::relu(*g, c, "out"));
    Lowered l = lower(g);
    // The graph output stays a copy; c is relu(a) in place plus b copied in.
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 1) << plan_to_string(*l.g, l.plan);
    expect_same_values(*g, *l.g);
  }
  // f16 channels-last inputs of 4 channels: the second one's place (8 bytes) is not aligned.
  {
    auto g = std::make_shared<Graph>("unaligned");
    Tensor x = g->input("x", DType::F16, {"N", 8, 4, 4}, Layout::NHWC);
    Tensor a = test::relu(*g, test::conv(*g, x, 4, 1, "ca"), "ra");
    Tensor b = test::relu(*g, test::conv(*g, x, 4, 1, "cb"), "rb");
    g->output(test::conv(*g, test::cat(*g, {a, b}, 1, "c"), 8, 1, "out"));
    Lowered l = lower(g);
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 1) << plan_to_string(*l.g, l.plan);
    EXPECT_EQ(l.g->tensor(tensor_id(*l.g, "ra")).view_of, -1);
    expect_same_values(*g, *l.g);
    // The plan's note says why the concat stays a copy kernel.
    Graph c = *g;
    std::vector<std::string> eliminated, kept;
    EXPECT_EQ(fold_concat_views(c, &eliminated, &kept), 0);
    ASSERT_EQ(kept.size(), 1u);
    EXPECT_EQ(kept[0], "c (input 1 would start at 4 of dim 1, not 16 bytes into the buffer)");
  }
  // Gathers of indices that are no progression in range stay copies (the out-of-range one
  // reports its error at run time).
  {
    auto g = std::make_shared<Graph>("gathers");
    Tensor x = g->input("x", DType::F32, {"N", 8, 64});
    for (auto idx : {std::vector<int64_t>{3, 1}, std::vector<int64_t>{2, 9}}) {
      Tensor i = g->constant(fmt::format("i{}", idx[1]), {DType::I64, {2}, Layout::NCHW, {}},
                             HostTensor::from_i64(DType::I64, {2}, idx));
      g->output(test::relu(*g, g->gather(x, i, 1), fmt::format("r{}", idx[1])));
    }
    Lowered l = lower(g);
    EXPECT_EQ(count_kind(l.plan, GroupKind::View), 0) << plan_to_string(*l.g, l.plan);
  }
  // A slice a conv reads, and a slice of a constant, stay copies.
  {
    auto g = std::make_shared<Graph>("slices");
    Tensor x = g->input("x", DType::F16, {"N", 16, 4, 4}, Layout::NHWC);
    Tensor s = g->slice(x, {0}, {8}, {1});
    g->output(test::conv(*g, s, 8, 1, "out"));
    Tensor k = g->constant_random("k", {DType::F16, {16, 8}, Layout::NCHW, {}}, "normal", 0, 1, 3);
    g->output(test::relu(*g, g->slice(k, {0}, {4}, {1}), "kr"));
    Lowered l = lower(g);
    EXPECT_EQ(count_kind(l.plan, GroupKind::Copy), 2) << plan_to_string(*l.g, l.plan);
    EXPECT_EQ(count_kind(l.plan, GroupKind::View), 0) << plan_to_string(*l.g, l.plan);
    expect_same_values(*g, *l.g);
    // The plan's note says why each stays a copy kernel.
    Graph c = *g;
    std::vector<std::string> views, kept;
    EXPECT_EQ(fold_slice_views(c, &views, &kept), 0);
    ASSERT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept[0],
              fmt::format("{} (slice: conv2d 'out' reads dense memory only)", g->nodes()[0].name));
    EXPECT_NE(kept[1].find("(slice: it reads a constant)"), std::string::npos) << kept[1];
  }
}

}  // namespace
}  // namespace kiln
