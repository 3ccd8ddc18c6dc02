#include "runtime/memory_plan.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "engine/base/check.hpp"
#include "engine/base/memory_budget.hpp"
#include "engine/ir/graph_queries.hpp"

namespace kiln {

namespace {
int64_t align_up(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}
}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& bufs, int64_t align) {
  KILN_ASSERT(align > 0 && (align & (align - 1)) == 0, "alignment {} is not a power of two", align);
  MemoryPlan p;
  p.offsets.assign(bufs.size(), 0);
  std::vector<int64_t> size(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    KILN_ASSERT(bufs[i].bytes >= 0 && bufs[i].first <= bufs[i].last, "bad buffer request {}", i);
    size[i] = align_up(std::max<int64_t>(bufs[i].bytes, 1), align);
    p.total += size[i];
  }
  std::vector<size_t> order(bufs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (size[a] != size[b]) return size[a] > size[b];
    return bufs[a].first < bufs[b].first;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    // The intervals of placed buffers live at the same time as i, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (bufs[j].first <= bufs[i].last && bufs[i].first <= bufs[j].last)
        busy.emplace_back(p.offsets[j], p.offsets[j] + size[j]);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo - at >= size[i]) break;  // fits in the gap before this interval
      at = std::max(at, hi);
    }
    p.offsets[i] = at;
    p.peak = std::max(p.peak, at + size[i]);
    placed.push_back(i);
  }
  return p;
}

int64_t tensor_bytes(const TensorDesc& d, const Bindings& b) {
  std::vector<int64_t> shape = eval_shape(d.shape, b);
  int64_t es = static_cast<int64_t>(dtype_size(d.dtype));
  auto overflow = [&] {
    KILN_FAIL("a tensor {} would be more than 2^63 bytes for these shapes", d.str());
  };
  if (d.layout != Layout::Strided) {
    int64_t n = es;
    for (int64_t s : shape)
      if (!checked_mul(n, s, &n)) overflow();
    return n;
  }
  std::vector<int64_t> st = layout_strides(shape, d.layout, d.strides);
  int64_t extent = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    int64_t span = 0;
    if (!checked_mul(shape[i] - 1, std::abs(st[i]), &span) || !checked_add(extent, span, &extent))
      overflow();
  }
  if (!checked_mul(extent, es, &extent)) overflow();
  return extent;
}

ArenaPlan plan_arena(const Graph& g, const std::vector<KernelSpec>& kernels, const Bindings& b) {
  std::set<int> external(g.outputs().begin(), g.outputs().end());
  for (size_t t = 0; t < g.tensors().size(); ++t)
    if (g.tensors()[t].role != TensorRole::Intermediate) external.insert(static_cast<int>(t));
  std::map<int, BufferRequest> live;
  for (int k = 0; k < static_cast<int>(kernels.size()); ++k) {
    for (const KernelArg& a : kernels[k].args) {
      if (a.kind != KernelArg::Kind::Tensor && a.kind != KernelArg::Kind::TensorMap) continue;
      KILN_ASSERT(a.tensor >= 0 && a.tensor < static_cast<int>(g.tensors().size()),
                  "kernel {} references tensor id {}", kernels[k].name, a.tensor);
      // A view lives in its root's memory: the root's buffer is live wherever a view is used.
      const int t = memory_root(g, a.tensor);
      if (external.count(t)) continue;
      auto [it, fresh] = live.emplace(t, BufferRequest{0, k, k});
      it->second.last = k;
    }
  }
  std::vector<int> ids;
  std::vector<BufferRequest> reqs;
  for (auto& [id, r] : live) {
    r.bytes = tensor_bytes(g.tensor(id).desc, b);
    ids.push_back(id);
    reqs.push_back(r);
  }
  MemoryPlan mp = plan_memory(reqs);
  ArenaPlan ap;
  ap.peak = mp.peak;
  ap.total = mp.total;
  for (size_t i = 0; i < ids.size(); ++i) ap.offset[ids[i]] = mp.offsets[i];
  return ap;
}

}  // namespace kiln
