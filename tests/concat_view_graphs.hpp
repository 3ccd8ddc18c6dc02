// The graphs of the concat-elimination and strided-view tests (CPU: tests/test_concat_views.cpp,
// GPU: tests/gpu/test_concat_views_gpu.cpp): DenseNet's dense block, an Inception block, a UNet
// skip, a ShuffleNet unit, a row-major concat along the batch, slices and an expand. Every conv
// weight is a seeded random constant; `x` (and `y`, `z` where named) are the inputs, `out` the
// output. f16 graphs are channels-last (the layout convs use at f16), f32 ones row-major.
#pragma once

#include <memory>
#include <string>

#include "kiln/graph.hpp"

namespace kiln::test {

inline Layout conv_layout(DType dt) {
  return dt == DType::F32 ? Layout::NCHW : Layout::NHWC;
}

inline Tensor conv(Graph& g, Tensor x, int64_t k, int64_t r, const std::string& name,
                   int64_t groups = 1, uint64_t seed = 1) {
  const TensorDesc& xd = g.tensor(x.id).desc;
  const int64_t c = xd.shape[1].value();
  TensorDesc wd{xd.dtype, {k, c / groups, r, r}, conv_layout(xd.dtype), {}};
  Tensor w = g.constant_random(name + ".w", wd, "normal", 0.0, 0.25, seed);
  Tensor b = g.constant_random(name + ".b", {xd.dtype, {k}, Layout::NCHW, {}}, "normal", 0.0, 0.5,
                               seed + 100);
  return g.add_node1("conv2d", {x, w, b},
                     {{"padding", std::vector<int64_t>{r / 2, r / 2}}, {"groups", groups}}, name);
}

// Inference batchnorm with random statistics (variance in [0.5, 1.5)).
inline Tensor bn(Graph& g, Tensor x, const std::string& name, uint64_t seed) {
  const TensorDesc& xd = g.tensor(x.id).desc;
  const Shape c{xd.shape[1]};
  auto p = [&](const char* what, const char* dist, double a, double b, uint64_t s) {
    return g.constant_random(name + "." + what, {xd.dtype, c, Layout::NCHW, {}}, dist, a, b, s);
  };
  return g.add_node1(
      "batchnorm",
      {x, p("scale", "normal", 1.0, 0.2, seed), p("bias", "normal", 0.0, 0.2, seed + 1),
       p("mean", "normal", 0.0, 0.2, seed + 2), p("var", "uniform", 0.5, 1.5, seed + 3)},
      {}, name);
}

inline Tensor relu(Graph& g, Tensor x, const std::string& name) {
  return g.add_node1("relu", {x}, {}, name);
}

inline Tensor cat(Graph& g, const std::vector<Tensor>& xs, int64_t axis, const std::string& name) {
  return g.add_node1("concat", xs, {{"axis", axis}}, name);
}

// A dense block of two layers (growth 16): c0 = relu(conv(x)); f1 = conv(relu(bn(c0)));
// cat1 = [c0, f1]; f2 = conv(relu(bn(cat1))); cat2 = [cat1, f2]; out = conv1x1(cat2).
inline std::shared_ptr<Graph> dense_block(DType dt, Shape xs = {"N", 16, 8, 8}) {
  auto g = std::make_shared<Graph>("dense_block");
  Tensor x = g->input("x", dt, xs, conv_layout(dt));
  Tensor c0 = relu(*g, conv(*g, x, 32, 3, "conv0", 1, 1), "relu0");
  Tensor f1 = conv(*g, relu(*g, bn(*g, c0, "bn1", 10), "relu1"), 16, 3, "conv1", 1, 2);
  Tensor cat1 = cat(*g, {c0, f1}, 1, "cat1");
  Tensor f2 = conv(*g, relu(*g, bn(*g, cat1, "bn2", 20), "relu2"), 16, 3, "conv2", 1, 3);
  Tensor cat2 = cat(*g, {cat1, f2}, 1, "cat2");
  g->output(conv(*g, cat2, 32, 1, "out", 1, 4));
  return g;
}

// A dense block as torchvision exports it: every layer concatenates all features so far
// (x0 = the stem's pool, f1, f2, ...), so each layer's concat is a prefix of the block's last:
// c2 = [x0, f1], c3 = [x0, f1, f2], block = [x0, f1, f2, f3]; out = conv1x1(relu(bn(block))).
inline std::shared_ptr<Graph> dense_block_exported(DType dt, Shape xs = {"N", 16, 16, 16}) {
  auto g = std::make_shared<Graph>("dense_block_exported");
  Tensor x = g->input("x", dt, xs, conv_layout(dt));
  Pool2dOptions po;
  po.kernel = {2, 2};
  Tensor x0 = g->maxpool2d(relu(*g, conv(*g, x, 32, 3, "stem", 1, 1), "stem.relu"), po);
  auto layer = [&](Tensor in, const std::string& name, uint64_t seed) {
    return conv(*g, relu(*g, bn(*g, in, name + ".bn", seed), name + ".relu"), 16, 3, name, 1, seed);
  };
  Tensor f1 = layer(x0, "l1", 10);
  Tensor f2 = layer(cat(*g, {x0, f1}, 1, "c2"), "l2", 20);
  Tensor f3 = layer(cat(*g, {x0, f1, f2}, 1, "c3"), "l3", 30);
  Tensor block = cat(*g, {x0, f1, f2, f3}, 1, "block");
  g->output(conv(*g, relu(*g, bn(*g, block, "t.bn", 40), "t.relu"), 32, 1, "out", 1, 5));
  return g;
}

// Four branches (1x1; 1x1 -> 3x3; 1x1 -> 5x5; maxpool -> 1x1), each ending in a relu, joined.
// `avg_pool`: the pool branch averages (Inception-v3's; engine/passes/pools_after_convs.cpp moves
// the pool after its narrowing conv, whose relu then writes its place of the concat from the
// pool's kernel) instead of taking the maximum (GoogLeNet's).
inline std::shared_ptr<Graph> inception_block(DType dt, Shape xs = {"N", 32, 8, 8},
                                              bool avg_pool = false) {
  auto g = std::make_shared<Graph>("inception_block");
  Tensor x = g->input("x", dt, xs, conv_layout(dt));
  Tensor b1 = relu(*g, conv(*g, x, 16, 1, "b1", 1, 1), "b1.relu");
  Tensor b2 = relu(*g, conv(*g, relu(*g, conv(*g, x, 24, 1, "b2a", 1, 2), "b2a.relu"), 32, 3, "b2"),
                   "b2.relu");
  Tensor b3 = relu(*g, conv(*g, relu(*g, conv(*g, x, 8, 1, "b3a", 1, 3), "b3a.relu"), 16, 5, "b3"),
                   "b3.relu");
  Pool2dOptions po;
  po.kernel = {3, 3};
  po.stride = {1, 1};
  po.padding = {1, 1};
  Tensor pooled = avg_pool ? g->avgpool2d(x, po) : g->maxpool2d(x, po);
  Tensor b4 = relu(*g, conv(*g, pooled, 16, 1, "b4", 1, 4), "b4.relu");
  Tensor joined = cat(*g, {b1, b2, b3, b4}, 1, "cat");
  g->output(conv(*g, joined, 16, 1, "out", 1, 5));
  return g;
}

// A UNet level: e1 = relu(conv(x)) feeds the pool (down) and the skip concat; the decoder's
// upsampling conv_transpose2d writes its half of the concat in place, e1 is copied in.
inline std::shared_ptr<Graph> unet_skip(DType dt, Shape xs = {"N", 16, 16, 16}) {
  auto g = std::make_shared<Graph>("unet_skip");
  Tensor x = g->input("x", dt, xs, conv_layout(dt));
  Tensor e1 = relu(*g, conv(*g, x, 32, 3, "enc", 1, 1), "enc.relu");
  Pool2dOptions po;
  po.kernel = {2, 2};
  Tensor d = relu(*g, conv(*g, g->maxpool2d(e1, po), 64, 3, "mid", 1, 2), "mid.relu");
  TensorDesc wd{dt, {64, 32, 2, 2}, conv_layout(dt), {}};
  Tensor wu = g->constant_random("up.w", wd, "normal", 0.0, 0.2, 3);
  Tensor up =
      g->add_node1("conv_transpose2d", {d, wu}, {{"stride", std::vector<int64_t>{2, 2}}}, "up");
  Tensor joined = cat(*g, {up, e1}, 1, "cat");
  g->output(relu(*g, conv(*g, joined, 32, 3, "dec", 1, 4), "out"));
  return g;
}

// A ShuffleNetV2 unit (stride 1): x splits in two halves; the second goes through 1x1 ->
// depthwise 3x3 -> 1x1, the first joins it unchanged; then the channel shuffle.
inline std::shared_ptr<Graph> shuffle_unit(DType dt, Shape xs = {"N", 32, 8, 8}) {
  auto g = std::make_shared<Graph>("shuffle_unit");
  Tensor x = g->input("x", dt, xs, conv_layout(dt));
  std::vector<Tensor> halves = g->add_node(
      "split", {x}, {{"axis", int64_t{1}}, {"split", std::vector<int64_t>{16, 16}}}, "split");
  Tensor b = relu(*g, conv(*g, halves[1], 16, 1, "pw1", 1, 1), "pw1.relu");
  b = conv(*g, b, 16, 3, "dw", 16, 2);
  b = relu(*g, conv(*g, b, 16, 1, "pw2", 1, 3), "pw2.relu");
  Tensor joined = cat(*g, {halves[0], b}, 1, "cat");
  const Dim n = xs[0], h = xs[2], w = xs[3];
  Tensor s = g->reshape(joined, {n, 2, 16, h, w});
  s = g->transpose(s, {0, 2, 1, 3, 4});
  g->output(g->add_node1("reshape", {s}, {{"shape", std::vector<Dim>{n, 32, h, w}}}, "out"));
  return g;
}

// A row-major concat along the (symbolic) batch: relu(x) and sigmoid(y) land at offsets 0 and
// N x 64 of one buffer, which a matmul reads.
inline std::shared_ptr<Graph> batch_concat(DType dt) {
  auto g = std::make_shared<Graph>("batch_concat");
  Tensor x = g->input("x", dt, {"N", 64});
  Tensor y = g->input("y", dt, {"N", 64});
  Tensor joined = cat(*g, {relu(*g, x, "rx"), g->add_node1("sigmoid", {y}, {}, "sy")}, 0, "cat");
  Tensor w = g->constant_random("w", {dt, {64, 32}, Layout::NCHW, {}}, "normal", 0.0, 0.2, 7);
  g->output(g->add_node1("matmul", {joined, w}, {}, "out"));
  return g;
}

// Slices read by elementwise ops only (two halves of x's last dim, a split's two outputs), an
// expand of z's unit dim and gathers of constant indices (x[:, 6]; x[:, [1, 3, 5]]), all views;
// outputs `ab`, `out`, `g0` and `g1`.
inline std::shared_ptr<Graph> slice_expand(DType dt) {
  auto g = std::make_shared<Graph>("slice_expand");
  Tensor x = g->input("x", dt, {"N", 8, 64});
  Tensor z = g->input("z", dt, {"N", 1, 64});
  Tensor a = g->slice(x, {0}, {32}, {2});
  Tensor b = g->slice(x, {32}, {64}, {2});
  g->output(g->add_node1("mul", {relu(*g, a, "ra"), b}, {}, "ab"));
  std::vector<Tensor> parts = g->add_node(
      "split", {x}, {{"axis", int64_t{1}}, {"split", std::vector<int64_t>{4, 4}}}, "split");
  Tensor e = g->expand(z, {"N", 4, 64});
  Tensor p = g->add_node1("sub", {parts[0], parts[1]}, {}, "p");
  g->output(g->add_node1("add", {p, e}, {}, "out"));
  auto index = [&](const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> v) {
    return g->constant(name, {DType::I64, Shape(shape.begin(), shape.end()), Layout::NCHW, {}},
                       HostTensor::from_i64(DType::I64, shape, v));
  };
  g->output(relu(*g, g->gather(x, index("i0", {}, {-2}), 1), "g0"));
  g->output(g->add_node1("neg", {g->gather(x, index("i1", {3}, {1, 3, 5}), 1)}, {}, "g1"));
  return g;
}

}  // namespace kiln::test
