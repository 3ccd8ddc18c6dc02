#include "runtime/kernel_timer.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "engine/base/check.hpp"
#include "kiln/host_tensor.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/event_timer.hpp"
#include "runtime/tensor_map.hpp"

namespace kiln::cuda {

namespace {

// Uniform(-1, 1) values of `dt` over `bytes` of device memory: a 64 Ki-element random block
// repeated (fresh per call, cheap for the tens of MB a layer has).
void fill_random(uint64_t ptr, size_t bytes, DType dt, uint64_t seed) {
  const size_t esize = static_cast<size_t>(dtype_size(dt));
  const size_t n = std::min<size_t>(size_t{1} << 16, std::max<size_t>(1, bytes / esize));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  HostTensor block = HostTensor::from_f64(dt, {static_cast<int64_t>(n)}, v);
  for (size_t off = 0; off < bytes; off += block.data.size())
    memcpy_htod(ptr + off, block.data.data(), std::min(block.data.size(), bytes - off));
}

}  // namespace

double time_kernel_alone(const KernelSpec& k, const std::vector<char>& cubin, const Graph& g,
                         const Bindings& b, int iters, const std::vector<int>& read_back,
                         std::map<int, std::vector<float>>* values) {
  struct Module {
    void* m;
    ~Module() { module_unload(m); }
  } mod{module_load(cubin)};
  void* fn = module_function(mod.m, k.entry);
  if (k.smem_bytes > 0) func_set_max_dynamic_smem(fn, k.smem_bytes);

  std::vector<DeviceBuffer> bufs;
  bufs.reserve(k.args.size());
  std::vector<uint64_t> ptrs(k.args.size());
  std::vector<long long> ints(k.args.size());
  std::vector<void*> params(k.args.size());
  std::vector<TensorMapBytes> maps(k.args.size());
  std::map<int, uint64_t> tensor_ptr;
  for (size_t i = 0; i < k.args.size(); ++i) {
    const KernelArg& a = k.args[i];
    if (a.kind == KernelArg::Kind::TensorMap) continue;  // after the tensors (below)
    if (a.kind == KernelArg::Kind::Int) {
      ints[i] = a.value.eval(b);
      params[i] = &ints[i];
      continue;
    }
    size_t bytes = 0;
    if (a.kind == KernelArg::Kind::ErrorWord) {
      bytes = 4;  // random indices out of range are reported here, and ignored
    } else if (a.kind == KernelArg::Kind::Scratch || a.kind == KernelArg::Kind::Counters) {
      bytes = static_cast<size_t>(a.value.eval(b)) * (a.kind == KernelArg::Kind::Counters ? 4 : 1);
    } else {
      const TensorDesc& d = g.tensor(a.tensor).desc;
      int64_t numel = 1;
      for (int64_t v : eval_shape(d.shape, b)) numel *= v;
      bytes = static_cast<size_t>(numel) * static_cast<size_t>(dtype_size(d.dtype));
    }
    bufs.emplace_back(std::max<size_t>(bytes, 16));
    if (a.kind == KernelArg::Kind::Tensor)
      fill_random(bufs.back().ptr(), bytes, g.tensor(a.tensor).desc.dtype,
                  0x6b696c6eull + 7919ull * static_cast<uint64_t>(a.tensor + 1));
    else
      memset_d8(bufs.back().ptr(), 0, bufs.back().bytes());  // counters start (and end) at zero
    ptrs[i] = bufs.back().ptr();
    params[i] = &ptrs[i];
    if (a.kind == KernelArg::Kind::Tensor) tensor_ptr[a.tensor] = ptrs[i];
  }
  for (size_t i = 0; i < k.args.size(); ++i) {
    const KernelArg& a = k.args[i];
    if (a.kind != KernelArg::Kind::TensorMap) continue;
    auto it = tensor_ptr.find(a.tensor);
    KILN_ASSERT(it != tensor_ptr.end(), "kernel {}: tensor map over tensor {} without its pointer",
                k.name, a.tensor);
    encode_kernel_tensor_map(&maps[i], a, g.tensor(a.tensor).desc.dtype, it->second, b);
    params[i] = maps[i].v;
  }
  uint32_t grid[3], block[3];
  for (int i = 0; i < 3; ++i) {
    int64_t gv = k.grid[static_cast<size_t>(i)].eval(b);
    KILN_ASSERT(gv >= 1 && gv <= 0x7fffffff, "kernel {}: grid[{}] = {}", k.name, i, gv);
    grid[i] = static_cast<uint32_t>(gv);
    block[i] = static_cast<uint32_t>(k.block[static_cast<size_t>(i)]);
  }
  auto run = [&] {
    launch(fn, grid, block, static_cast<uint32_t>(k.smem_bytes), nullptr, params.data(), k.name);
  };
  double ms = median_ms(time_flushed(run, 3, iters));
  ctx_synchronize();
  if (values) {
    for (int id : read_back) {
      auto it = tensor_ptr.find(id);
      if (it == tensor_ptr.end()) continue;
      const TensorDesc& d = g.tensor(id).desc;
      int64_t numel = 1;
      for (int64_t v : eval_shape(d.shape, b)) numel *= v;
      const size_t es = static_cast<size_t>(dtype_size(d.dtype));
      std::vector<std::byte> raw(static_cast<size_t>(numel) * es);
      if (!raw.empty()) memcpy_dtoh(raw.data(), it->second, raw.size());
      std::vector<float>& out = (*values)[id];
      out.resize(static_cast<size_t>(numel));
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<float>(load_element(d.dtype, raw.data() + i * es));
    }
  }
  return ms;
}

}  // namespace kiln::cuda
