// Swin's shifted-window attention as the ONNX export writes it, shared by the CPU pass test and
// the GPU test of attention in its mask's batch shape (engine/passes/attention_batch_splits.cpp):
// q, k and v [N W, H, S, D] (inputs [N, W, H, S, D] reshaped); scores scaled, plus a relative
// position bias [H, S, S], reshaped to [N, W, H, S, S] for the window mask [1, W, 1, S, S] (0 or
// -100), reshaped back, softmax, times v (then a relu, the graph output).
#pragma once

#include <memory>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

// `per_head`: q scaled by a [H, 1, 1] tensor (Swin V2's logit scale moved onto q) instead of a
// scalar.
inline std::shared_ptr<Graph> window_attention(int64_t w, int64_t h, int64_t s, int64_t d,
                                               DType dt = DType::F16, bool per_head = false) {
  auto g = std::make_shared<Graph>("window_attention");
  const Dim nw = Dim("N") * Dim(w);
  auto windows = [&](const char* name) {  // [N, W, H, S, D] as the [N W, H, S, D] Swin has
    return g->reshape(g->input(name, dt, {"N", w, h, s, d}), {nw, h, s, d});
  };
  Tensor q = windows("q"), k = windows("k"), v = windows("v");
  Tensor scale = per_head ? g->constant_random("scale", TensorDesc{dt, {h, 1, 1}, Layout::NCHW, {}},
                                               "uniform", 0.1, 0.3, 4)
                          : g->constant("scale", TensorDesc{dt, {}, Layout::NCHW, {}},
                                        HostTensor::from_f64(dt, {}, {0.125}));
  Tensor bias =
      g->constant_random("bias", TensorDesc{dt, {h, s, s}, Layout::NCHW, {}}, "normal", 0, 0.5, 3);
  std::vector<double> mv(static_cast<size_t>(w * s * s));
  for (size_t i = 0; i < mv.size(); ++i) mv[i] = (i * 7919 % 5 == 0) ? -100.0 : 0.0;
  Tensor mask = g->constant("mask", TensorDesc{dt, {1, w, 1, s, s}, Layout::NCHW, {}},
                            HostTensor::from_f64(dt, {1, w, 1, s, s}, mv));
  Tensor sc = g->add(g->matmul(g->mul(q, scale), k, {}, false, true), bias);
  Tensor m = g->reshape(g->add(g->reshape(sc, {"N", w, h, s, s}), mask), {nw, h, s, s});
  g->output(g->relu(g->matmul(g->softmax(m, 3), v)));
  return g;
}

}  // namespace kiln::test
