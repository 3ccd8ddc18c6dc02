// CUDA graphs (EngineOptions::cuda_graphs): replayed results equal plain runs and the CPU
// reference; replays after the outputs are poisoned rewrite them; new buffers, new shapes and a
// caller workspace each get their own capture; user errors stay located.
#include <gtest/gtest.h>

#include "kiln/engine.hpp"
#include "kiln/error.hpp"
#include "kiln/io.hpp"
#include "kiln/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;
using namespace kiln::gputest;

namespace {

Graph example(const char* file) {
  return load_graph_file(std::string(kiln::testing::source_dir()) + "/examples/graphs/" + file);
}

void poison(const DeviceData& d) {
  cuda::memset_d8(d.t.ptr, 0xFF, d.buf.bytes());
  cuda::ctx_synchronize();
}

TEST(CudaGraphGpu, ResnetBottleneckReplaysEqualPlainRuns) {
  KILN_REQUIRE_DEVICE();
  Graph g = example("resnet50_bottleneck.json");
  const int64_t n = 2;
  HostTensor x = random_tensor(DType::F16, {n, 256, 56, 56}, 11);
  HostTensor want = run_reference(g, {{"x", x}}).at("y");
  DeviceData dx = upload(x, Layout::NHWC);

  Engine plain_engine;
  EngineOptions o;
  o.cuda_graphs = true;
  Engine graph_engine(o);
  CompiledGraph plain = plain_engine.compile(g);
  CompiledGraph graphed = graph_engine.compile(g);
  Bindings b = g.bind({{"x", dx.t.shape}});
  std::vector<int64_t> ys = plain.output_shapes(b).at("y");

  DeviceData y_plain = alloc_poisoned(DType::F16, ys, Layout::NHWC);
  plain.run({{"x", dx.t}}, {{"y", y_plain.t}});
  HostTensor got_plain = download(y_plain);
  EXPECT_TRUE(all_close(got_plain, want, 1e-2));

  DeviceData y = alloc_poisoned(DType::F16, ys, Layout::NHWC);
  void* stream = cuda::stream_create();
  for (int i = 0; i < 5; ++i) {  // the first run captures, the others replay
    poison(y);
    graphed.run({{"x", dx.t}}, {{"y", y.t}}, stream);
    cuda::stream_synchronize(stream);
    EXPECT_TRUE(all_close(download(y), got_plain, 1e-3))
        << "run " << i << ": the replay differs from a plain run";
  }
  // Another output buffer: a new capture, same answer.
  DeviceData y2 = alloc_poisoned(DType::F16, ys, Layout::NHWC);
  graphed.run({{"x", dx.t}}, {{"y", y2.t}}, stream);
  cuda::stream_synchronize(stream);
  EXPECT_TRUE(all_close(download(y2), got_plain, 1e-3));
  // A caller workspace: another capture.
  int64_t ws_bytes = graphed.workspace_size(b);
  cuda::DeviceBuffer ws(static_cast<size_t>(std::max<int64_t>(ws_bytes, 256)));
  poison(y);
  graphed.run({{"x", dx.t}}, {{"y", y.t}}, stream, ws.ptr());
  cuda::stream_synchronize(stream);
  EXPECT_TRUE(all_close(download(y), got_plain, 1e-3));
  cuda::stream_destroy(stream);
}

TEST(CudaGraphGpu, SymbolicShapesEachGetTheirOwnGraph) {
  KILN_REQUIRE_DEVICE();
  Graph g = example("add_layernorm_gelu.json");
  EngineOptions o;
  o.cuda_graphs = true;
  Engine engine(o);
  CompiledGraph cg = engine.compile(g);
  for (int rep = 0; rep < 2; ++rep) {  // second pass: every shape replays its graph
    for (int64_t rows : {1, 7, 64, 7}) {
      HostTensor x = random_tensor(DType::F16, {rows, 4096}, 20 + rows);
      HostTensor r = random_tensor(DType::F16, {rows, 4096}, 40 + rows);
      HostTensor want = run_reference(g, {{"x", x}, {"r", r}}).at("y");
      DeviceData dx = upload(x), dr = upload(r);
      DeviceData y = alloc_poisoned(DType::F16, {rows, 4096});
      cg.run({{"x", dx.t}, {"r", dr.t}}, {{"y", y.t}});
      EXPECT_TRUE(all_close(download(y), want, 1e-2)) << "rows " << rows << " pass " << rep;
    }
  }
}

TEST(CudaGraphGpu, ErrorsStayLocatedAndLeaveNoCaptureBehind) {
  KILN_REQUIRE_DEVICE();
  Graph g = example("add_layernorm_gelu.json");
  EngineOptions o;
  o.cuda_graphs = true;
  Engine engine(o);
  CompiledGraph cg = engine.compile(g);
  DeviceData dx = upload(random_tensor(DType::F16, {4, 4096}, 1));
  DeviceData y = alloc_poisoned(DType::F16, {4, 4096});
  try {
    cg.run({{"x", dx.t}}, {{"y", y.t}});  // r is missing
    ADD_FAILURE() << "expected a user error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::User);
    EXPECT_NE(std::string(e.what()).find("'r'"), std::string::npos) << e.what();
  }
  // The stream state is clean: a good run afterwards works.
  HostTensor x = random_tensor(DType::F16, {4, 4096}, 2),
             r = random_tensor(DType::F16, {4, 4096}, 3);
  DeviceData dx2 = upload(x), dr = upload(r);
  cg.run({{"x", dx2.t}, {"r", dr.t}}, {{"y", y.t}});
  EXPECT_TRUE(all_close(download(y), run_reference(g, {{"x", x}, {"r", r}}).at("y"), 1e-2));
}

}  // namespace
