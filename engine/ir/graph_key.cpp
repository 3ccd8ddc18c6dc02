#include "engine/ir/graph_key.hpp"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>

#include "engine/base/check.hpp"
#include "engine/base/hash.hpp"
#include "kiln/op_list.hpp"

namespace kiln {

namespace {

// Two 64-bit multiply-rotate streams over 8-byte words (four lanes each, for constant data of
// megabytes), length-prefixed fields; finished with murmur3's fmix64.
class KeyHasher {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    u64(n);
    uint64_t lane[4] = {s_[0], s_[1], s_[2], s_[3]};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int k = 0; k < 4; ++k) {
        uint64_t w;
        std::memcpy(&w, p + i + 8 * k, 8);
        lane[k] = rotl(lane[k] ^ (w * kMul[k]), 29 + k) * kMul[3 - k];
      }
    }
    for (int k = 0; k < 4; ++k) s_[k] = lane[k];
    uint64_t tail = 0;
    int shift = 0;
    for (; i < n; ++i) {
      tail |= static_cast<uint64_t>(p[i]) << shift;
      shift += 8;
      if (shift == 64) {
        mix(tail);
        tail = 0;
        shift = 0;
      }
    }
    if (shift) mix(tail);
  }
  void u64(uint64_t v) { mix(v); }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  void dim(const Dim& d) {
    if (d.is_static()) {
      u64(0);
      u64(static_cast<uint64_t>(d.value()));
    } else {
      u64(1);
      str(d.str());
    }
  }
  std::string hex() const {
    uint64_t a = fmix(s_[0] ^ rotl(s_[2], 17) ^ count_);
    uint64_t b = fmix(s_[1] ^ rotl(s_[3], 23) ^ (count_ * kMul[1]));
    return fmt::format("{:016x}{:016x}", a, b);
  }
  uint64_t digest() const { return fmix(s_[0] ^ rotl(s_[1], 7) ^ rotl(s_[2], 19) ^ s_[3]); }

 private:
  static constexpr uint64_t kMul[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
                                       0x165667b19e3779f9ull, 0xff51afd7ed558ccdull};
  static uint64_t rotl(uint64_t x, int r) { return hash_rotl(x, r); }
  static uint64_t fmix(uint64_t k) { return hash_fmix64(k); }
  void mix(uint64_t v) {
    ++count_;
    for (int k = 0; k < 4; ++k) s_[k] = rotl(s_[k] ^ (v * kMul[k]), 31 - k) * kMul[(k + 1) & 3];
  }

  uint64_t s_[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                    0x082efa98ec4e6c89ull};
  uint64_t count_ = 0;
};

void hash_attr(KeyHasher& h, const AttrValue& v) {
  h.u64(v.index());
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          h.u64(static_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          uint64_t bits;
          std::memcpy(&bits, &x, 8);
          h.u64(bits);
        } else if constexpr (std::is_same_v<T, std::string>) {
          h.str(x);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          h.u64(x.size());
          for (int64_t i : x) h.u64(static_cast<uint64_t>(i));
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          h.u64(x.size());
          for (double f : x) {
            uint64_t bits;
            std::memcpy(&bits, &f, 8);
            h.u64(bits);
          }
        } else {
          h.u64(x.size());
          for (const Dim& d : x) h.dim(d);
        }
      },
      v);
}

Dim bake(const Dim& d, const Bindings& b) {
  return d.is_static() ? d : Dim(d.eval(b));
}

}  // namespace

std::string graph_key(const Graph& g) {
  KeyHasher h;
  h.str("kiln graph key 1");
  h.str(g.name());
  std::vector<bool> named(g.tensors().size(), false);  // inputs, outputs, constants
  for (int id : g.inputs()) named[id] = true;
  for (int id : g.outputs()) named[id] = true;
  h.u64(g.tensors().size());
  for (size_t id = 0; id < g.tensors().size(); ++id) {
    const TensorInfo& t = g.tensors()[id];
    h.u64(static_cast<uint64_t>(t.role));
    h.u64(static_cast<uint64_t>(t.producer + 1));
    h.u64(static_cast<uint64_t>(t.desc.dtype));
    h.u64(static_cast<uint64_t>(t.desc.layout));
    h.u64(t.desc.shape.size());
    for (const Dim& d : t.desc.shape) h.dim(d);
    h.u64(t.desc.strides.size());
    for (int64_t s : t.desc.strides) h.u64(static_cast<uint64_t>(s));
    bool constant = t.role == TensorRole::Constant;
    h.str(named[id] || constant ? t.name : std::string());
    h.u64(t.data.has_value());
    if (t.data) {
      const HostTensor& d = *t.data;
      h.u64(static_cast<uint64_t>(d.dtype));
      h.u64(d.shape.size());
      for (int64_t s : d.shape) h.u64(static_cast<uint64_t>(s));
      h.u64(d.strides.size());
      for (int64_t s : d.strides) h.u64(static_cast<uint64_t>(s));
      h.bytes(d.data.data(), d.data.size());
    }
  }
  h.u64(g.nodes().size());
  for (const Node& n : g.nodes()) {
    h.u64(static_cast<uint64_t>(n.op));
    h.u64(n.inputs.size());
    for (int i : n.inputs) h.u64(static_cast<uint64_t>(i + 1));
    h.u64(n.outputs.size());
    for (int o : n.outputs) h.u64(static_cast<uint64_t>(o + 1));
    h.u64(n.attrs.size());
    for (const auto& [k, v] : n.attrs) {
      h.str(k);
      hash_attr(h, v);
    }
  }
  h.u64(g.inputs().size());
  for (int id : g.inputs()) h.u64(static_cast<uint64_t>(id));
  h.u64(g.outputs().size());
  for (int id : g.outputs()) h.u64(static_cast<uint64_t>(id));
  return h.hex();
}

uint64_t graph_names_hash(const Graph& g) {
  KeyHasher h;
  for (const TensorInfo& t : g.tensors()) h.str(t.name);
  for (const Node& n : g.nodes()) h.str(n.name);
  return h.digest();
}

Graph specialize_graph(const Graph& g, const Bindings& b) {
  Graph s = g;
  for (TensorInfo& t : s.mutable_tensors())
    for (Dim& d : t.desc.shape) d = bake(d, b);
  for (Node& n : s.mutable_nodes())
    for (auto& [k, v] : n.attrs)
      if (auto* dims = std::get_if<std::vector<Dim>>(&v))
        for (Dim& d : *dims) d = bake(d, b);
  KILN_ASSERT(s.symbols().empty(), "specialize_graph: symbols left after binding");
  return s;
}

}  // namespace kiln
