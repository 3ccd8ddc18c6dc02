// Host tensors and f16/bf16 conversion (round to nearest even).
#include <cmath>
#include <cstring>

#include "engine/check.hpp"
#include "engine/half.hpp"
#include "kiln/host_tensor.hpp"

namespace kiln {

uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (ax < 0x38800000u) {  // below 2^-14: subnormal half (exact scaling, then RNE)
    float a;
    std::memcpy(&a, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t h = (ax >> 13) - ((127u - 15u) << 10);
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_bits_to_f32(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

double load_element(DType t, const std::byte* p) {
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_bits_to_f32(h);
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_bits_to_f32(h);
    }
  }
  return 0;
}

void store_element(DType t, std::byte* p, double v) {
  float f = static_cast<float>(v);
  switch (t) {
    case DType::F32:
      std::memcpy(p, &f, 4);
      break;
    case DType::F16: {
      uint16_t h = f32_to_f16_bits(f);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::BF16: {
      uint16_t h = f32_to_bf16_bits(f);
      std::memcpy(p, &h, 2);
      break;
    }
  }
}

double round_to(DType t, double v) {
  std::byte buf[4];
  store_element(t, buf, v);
  return load_element(t, buf);
}

HostTensor HostTensor::zeros(DType dtype, std::vector<int64_t> shape, Layout layout) {
  KILN_ASSERT(layout != Layout::Strided, "zeros() needs a dense layout");
  HostTensor t;
  t.dtype = dtype;
  t.strides = layout_strides(shape, layout);
  t.shape = std::move(shape);
  t.data.assign(static_cast<size_t>(t.numel()) * dtype_size(dtype), std::byte{0});
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool HostTensor::is_row_major() const {
  return strides == layout_strides(shape, Layout::NCHW);
}

namespace {
// Calls f(logical_index, storage_offset) for every element in row-major logical order.
template <class F>
void for_each_offset(const HostTensor& t, F&& f) {
  int64_t n = t.numel();
  int r = t.rank();
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) {
        off += t.strides[d];
        break;
      }
      off -= t.strides[d] * (t.shape[d] - 1);
      idx[d] = 0;
    }
  }
}
}  // namespace

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  size_t es = dtype_size(dtype);
  for_each_offset(*this, [&](int64_t i, int64_t off) {
    v[i] = load_element(dtype, data.data() + off * static_cast<int64_t>(es));
  });
  return v;
}

HostTensor HostTensor::from_f64(DType dtype, std::vector<int64_t> shape,
                                const std::vector<double>& v, Layout layout) {
  HostTensor t = zeros(dtype, std::move(shape), layout);
  KILN_ASSERT(static_cast<int64_t>(v.size()) == t.numel(), "from_f64: {} values for {} elements",
              v.size(), t.numel());
  size_t es = dtype_size(dtype);
  for_each_offset(t, [&](int64_t i, int64_t off) {
    store_element(dtype, t.data.data() + off * static_cast<int64_t>(es), v[i]);
  });
  return t;
}

HostTensor HostTensor::relayout(Layout layout) const {
  // Already laid out that way (the common case for weights): one copy, no per-element walk.
  if (strides == layout_strides(shape, layout) &&
      data.size() == static_cast<size_t>(numel()) * dtype_size(dtype))
    return *this;
  HostTensor t = zeros(dtype, shape, layout);
  size_t es = dtype_size(dtype);
  std::vector<int64_t> src_off(static_cast<size_t>(numel()));
  for_each_offset(*this, [&](int64_t i, int64_t off) { src_off[i] = off; });
  for_each_offset(t, [&](int64_t i, int64_t off) {
    std::memcpy(t.data.data() + off * static_cast<int64_t>(es),
                data.data() + src_off[i] * static_cast<int64_t>(es), es);
  });
  return t;
}

}  // namespace kiln
