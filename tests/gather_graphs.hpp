// Graphs of gather and gather_elements, shared by the CPU codegen tests (tests/test_gather.cpp:
// every kernel compiles with NVRTC) and the GPU op harness (tests/gpu/test_ops_gpu.cpp: every
// kernel against the CPU reference). They cover i32 and i64 indices, scalar (0-D) indices,
// negative axes, the vector path (an innermost dim a multiple of the vector width) and the scalar
// one, symbolic dims, an embedding lookup (a constant table, run-time ids) and elementwise
// neighbours. Index inputs are named "i*": the harness fills them with in-range values,
// negative ones included (index_range).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::test {

struct GatherGraph {
  std::string name;
  std::function<std::shared_ptr<Graph>()> build;
  std::map<std::string, std::vector<int64_t>> inputs;  // concrete shapes for a run
  // Index inputs: the size of the axis they index (values drawn from [-size, size)).
  std::map<std::string, int64_t> index_size;
};

inline std::vector<GatherGraph> gather_graphs(DType dt) {
  const std::string d = dtype_name(dt);
  std::vector<GatherGraph> v;
  v.push_back({"gather_axes_" + d,
               [dt] {
                 auto g = std::make_shared<Graph>("gather_axes");
                 Tensor x = g->input("x", dt, {"N", 7, 5, 16});
                 Tensor i32 = g->input("ia", DType::I32, {3, 2});
                 Tensor i64 = g->input("ib", DType::I64, {4});
                 Tensor s = g->input("is", DType::I64, std::vector<Dim>{});
                 g->output(g->gather(x, i32, 1));            // [N, 3, 2, 5, 16]: vectors
                 g->output(g->gather(g->neg(x), i64, -2));   // [N, 7, 4, 16] after a pointwise
                 g->output(g->gather(x, s, 3));              // [N, 7, 5]: a scalar index, innermost
                 g->output(g->relu(g->gather(x, i64, -1)));  // [N, 7, 5, 4]: then a consumer
                 return g;
               },
               {{"x", {3, 7, 5, 16}}, {"ia", {3, 2}}, {"ib", {4}}, {"is", {}}},
               {{"ia", 7}, {"ib", 5}, {"is", 16}}});
  v.push_back({"gather_embedding_" + d,
               [dt] {
                 auto g = std::make_shared<Graph>("embedding");
                 TensorDesc wd;
                 wd.dtype = dt;
                 wd.shape = {1000, 24};
                 Tensor w = g->constant_random("wte", wd, "uniform", -1.0, 1.0, 7);
                 Tensor ids = g->input("ids", DType::I64, {"B", "S"});
                 Tensor e = g->gather(w, ids, 0);  // [B, S, 24]
                 g->output(e);
                 Tensor ids32 = g->input("ip", DType::I32, {"S"});
                 g->output(g->gather(w, ids32, 0));  // [S, 24]
                 return g;
               },
               {{"ids", {3, 37}}, {"ip", {37}}},
               {{"ids", 1000}, {"ip", 1000}}});
  // BERT's embeddings: word + token type lookups, their sum layer-normalized; the lookups fuse
  // into the row norm's prologue (rows of 64: vectors; rows of 37: the scalar tail).
  for (int64_t D : {64, 37})
    v.push_back({fmt::format("gather_embedding_layernorm_d{}_{}", D, d),
                 [dt, D] {
                   auto g = std::make_shared<Graph>("bert_embeddings");
                   // A constant [rows, D] ([D] for rows 0) of uniform values in [lo, hi).
                   auto table = [&](const char* name, int64_t rows, double lo, double hi,
                                    uint64_t seed) {
                     TensorDesc td;
                     td.dtype = dt;
                     td.shape = rows > 0 ? Shape{rows, D} : Shape{D};
                     return g->constant_random(name, td, "uniform", lo, hi, seed);
                   };
                   Tensor ids = g->input("ids", DType::I64, {"B", "S"});
                   Tensor tt = g->input("it", DType::I32, {"B", "S"});
                   Tensor s = g->add(g->gather(table("wte", 300, -1, 1, 3), ids, 0),
                                     g->gather(table("tte", 2, -1, 1, 4), tt, 0));
                   g->output(g->layernorm(s, table("ln_s", 0, 0.5, 1.5, 5),
                                          table("ln_b", 0, -0.5, 0.5, 6)));
                   return g;
                 },
                 {{"ids", {3, 13}}, {"it", {3, 13}}},
                 {{"ids", 300}, {"it", 2}}});
  v.push_back({"gather_odd_" + d,
               [dt] {
                 auto g = std::make_shared<Graph>("gather_odd");
                 Tensor x = g->input("x", dt, {"M", 9});
                 Tensor i = g->input("ic", DType::I32, {"K", 3});
                 g->output(g->gather(x, i, 0));  // [K, 3, 9]: symbolic axis size, scalar path
                 g->output(g->gather(x, i, 1));  // [M, K, 3]
                 return g;
               },
               {{"x", {11, 9}}, {"ic", {5, 3}}},
               {{"ic", 9}}});
  v.push_back({"gather_elements_" + d,
               [dt] {
                 auto g = std::make_shared<Graph>("gather_elements");
                 Tensor x = g->input("x", dt, {"N", 6, 16});
                 Tensor i = g->input("ie", DType::I64, {"N", 6, 16});
                 Tensor j = g->input("if", DType::I32, {"N", 11, 5});
                 g->output(g->gather_elements(x, i, 2));          // along the innermost dim
                 g->output(g->gather_elements(g->exp(x), j, 1));  // larger along the axis
                 return g;
               },
               {{"x", {2, 6, 16}}, {"ie", {2, 6, 16}}, {"if", {2, 11, 5}}},
               {{"ie", 16}, {"if", 6}}});
  return v;
}

// Gathers over integer and bool data (scalar copies, bit-exact).
inline std::vector<GatherGraph> gather_int_graphs() {
  std::vector<GatherGraph> v;
  for (DType dt : {DType::I32, DType::I64, DType::Bool})
    v.push_back({fmt::format("gather_{}", dtype_name(dt)),
                 [dt] {
                   auto g = std::make_shared<Graph>("gather_int");
                   Tensor x = g->input("x", dt, {"N", 10});
                   Tensor i = g->input("ia", DType::I64, {2, 3});
                   g->output(g->gather(x, i, 1));
                   g->output(g->gather_elements(x, g->input("ib", DType::I32, {"N", 4}), 1));
                   return g;
                 },
                 {{"x", {5, 10}}, {"ia", {2, 3}}, {"ib", {5, 4}}},
                 {{"ia", 10}, {"ib", 10}}});
  return v;
}

}  // namespace kiln::test
