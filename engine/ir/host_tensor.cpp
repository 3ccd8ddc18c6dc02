// Host tensors and f16/bf16 conversion (round to nearest even).
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <mutex>

#include "engine/base/check.hpp"
#include "engine/base/half.hpp"
#include "engine/base/memory_budget.hpp"
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
  // Round to nearest even at bit 13 without a data-dependent branch (a carry out of the mantissa
  // moves into the exponent, which is the right result).
  ax += 0xfffu + ((ax >> 13) & 1u);
  uint32_t h = (ax >> 13) - ((127u - 15u) << 10);
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

int64_t float_to_int(DType t, double v) {
  if (t == DType::Bool) return v != 0 ? 1 : 0;
  if (std::isnan(v)) return 0;
  const double lo = t == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = t == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
  if (v <= lo) return t == DType::I32 ? INT32_MIN : INT64_MIN;
  if (v >= hi) return t == DType::I32 ? INT32_MAX : INT64_MAX;
  return static_cast<int64_t>(v);  // truncates toward zero
}

int64_t wrap_int(DType t, int64_t v) {
  if (t == DType::Bool) return v != 0 ? 1 : 0;
  if (t == DType::I32) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return v;
}

int64_t load_int(DType t, const std::byte* p) {
  switch (t) {
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::Bool:
      return std::to_integer<uint8_t>(*p) != 0 ? 1 : 0;
    default:
      return float_to_int(DType::I64, load_element(t, p));
  }
}

void store_int(DType t, std::byte* p, int64_t v) {
  switch (t) {
    case DType::I32: {
      int32_t x = static_cast<int32_t>(wrap_int(t, v));
      std::memcpy(p, &x, 4);
      return;
    }
    case DType::I64:
      std::memcpy(p, &v, 8);
      return;
    case DType::Bool:
      *p = std::byte{static_cast<uint8_t>(v != 0 ? 1 : 0)};
      return;
    default:
      store_element(t, p, int_to_double(t, v));
  }
}

double int_to_double(DType t, int64_t v) {
  // Through f32 for the 32-bit and 16-bit types, as the kernels convert (one rounding to f32).
  return t == DType::I64 || t == DType::I32 || t == DType::Bool ? static_cast<double>(v)
                                                                : static_cast<float>(v);
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
    case DType::I32:
    case DType::I64:
    case DType::Bool:
      return static_cast<double>(load_int(t, p));
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
    case DType::I32:
    case DType::I64:
    case DType::Bool:
      store_int(t, p, float_to_int(t, v));
      break;
  }
}

double round_to(DType t, double v) {
  std::byte buf[8];
  store_element(t, buf, v);
  return load_element(t, buf);
}

HostTensor HostTensor::zeros(DType dtype, std::vector<int64_t> shape, Layout layout) {
  KILN_ASSERT(layout != Layout::Strided, "zeros() needs a dense layout");
  // The last guard for sizes that a file or a flag decided: callers that know the tensor's name
  // check the budget first, with it.
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape)
    KILN_CHECK(d >= 0 && checked_mul(bytes, d, &bytes),
               "a host tensor {}[{}]: the size overflows 64 bits", dtype_name(dtype),
               fmt::join(shape, ", "));
  check_host_bytes(fmt::format("a host tensor {}[{}]", dtype_name(dtype), fmt::join(shape, ", ")),
                   static_cast<uint64_t>(bytes));
  HostTensor t;
  t.dtype = dtype;
  t.strides = layout_strides(shape, layout);
  t.shape = std::move(shape);
  t.data.assign(static_cast<size_t>(bytes), std::byte{0});
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
// Calls f(offset_a, offset_b) for every element in row-major logical order of `shape`, with its
// storage offsets under two stride vectors (one odometer, no per-element index vector).
template <class F>
void for_each_offset2(const std::vector<int64_t>& shape, const std::vector<int64_t>& sa,
                      const std::vector<int64_t>& sb, F&& f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return;
  const int r = static_cast<int>(shape.size());
  // The innermost dim runs as a tight loop; the odometer steps the outer ones.
  const int64_t inner = r ? shape[r - 1] : 1, ia = r ? sa[r - 1] : 0, ib = r ? sb[r - 1] : 0;
  std::vector<int64_t> idx(r, 0);
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j) f(oa + j * ia, ob + j * ib);
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= sa[d] * (shape[d] - 1);
      ob -= sb[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Typed element access: the dtype switch stays outside the element loops (weights run to tens of
// millions of elements on every Engine build: batchnorm folding, constant upload).
template <class F>
void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      f(
          [](const std::byte* p) {
            float v;
            std::memcpy(&v, p, 4);
            return static_cast<double>(v);
          },
          [](std::byte* p, double v) {
            float x = static_cast<float>(v);
            std::memcpy(p, &x, 4);
          });
      return;
    case DType::F16:
      f(
          [](const std::byte* p) {
            uint16_t h;
            std::memcpy(&h, p, 2);
            return static_cast<double>(f16_bits_to_f32(h));
          },
          [](std::byte* p, double v) {
            uint16_t h = f32_to_f16_bits(static_cast<float>(v));
            std::memcpy(p, &h, 2);
          });
      return;
    case DType::BF16:
      f(
          [](const std::byte* p) {
            uint16_t h;
            std::memcpy(&h, p, 2);
            return static_cast<double>(bf16_bits_to_f32(h));
          },
          [](std::byte* p, double v) {
            uint16_t h = f32_to_bf16_bits(static_cast<float>(v));
            std::memcpy(p, &h, 2);
          });
      return;
    case DType::I32:
    case DType::I64:
    case DType::Bool:
      f([t](const std::byte* p) { return load_element(t, p); },
        [t](std::byte* p, double v) { store_element(t, p, v); });
      return;
  }
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  return layout_strides(shape, Layout::NCHW);
}
}  // namespace

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  const std::byte* base = data.data();
  with_dtype(dtype, [&](auto load, auto) {
    if (is_row_major()) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = load(base + static_cast<int64_t>(i) * es);
      return;
    }
    for_each_offset2(shape, row_major_strides(shape), strides,
                     [&](int64_t i, int64_t off) { v[i] = load(base + off * es); });
  });
  return v;
}

HostTensor HostTensor::from_f64(DType dtype, std::vector<int64_t> shape,
                                const std::vector<double>& v, Layout layout) {
  HostTensor t = zeros(dtype, std::move(shape), layout);
  KILN_ASSERT(static_cast<int64_t>(v.size()) == t.numel(), "from_f64: {} values for {} elements",
              v.size(), t.numel());
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  std::byte* base = t.data.data();
  with_dtype(dtype, [&](auto, auto store) {
    if (t.is_row_major()) {
      for (size_t i = 0; i < v.size(); ++i) store(base + static_cast<int64_t>(i) * es, v[i]);
      return;
    }
    for_each_offset2(t.shape, row_major_strides(t.shape), t.strides,
                     [&](int64_t i, int64_t off) { store(base + off * es, v[i]); });
  });
  return t;
}

std::vector<int64_t> HostTensor::to_i64() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  const std::byte* base = data.data();
  if (is_row_major()) {
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = load_int(dtype, base + static_cast<int64_t>(i) * es);
    return v;
  }
  for_each_offset2(shape, row_major_strides(shape), strides,
                   [&](int64_t i, int64_t off) { v[i] = load_int(dtype, base + off * es); });
  return v;
}

HostTensor HostTensor::from_i64(DType dtype, std::vector<int64_t> shape,
                                const std::vector<int64_t>& v, Layout layout) {
  HostTensor t = zeros(dtype, std::move(shape), layout);
  KILN_ASSERT(static_cast<int64_t>(v.size()) == t.numel(), "from_i64: {} values for {} elements",
              v.size(), t.numel());
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  std::byte* base = t.data.data();
  if (t.is_row_major()) {
    for (size_t i = 0; i < v.size(); ++i)
      store_int(dtype, base + static_cast<int64_t>(i) * es, v[i]);
    return t;
  }
  for_each_offset2(t.shape, row_major_strides(t.shape), t.strides,
                   [&](int64_t i, int64_t off) { store_int(dtype, base + off * es, v[i]); });
  return t;
}

HostTensor HostTensor::relayout(Layout layout) const {
  // Already laid out that way (the common case for weights): one copy, no per-element walk.
  if (strides == layout_strides(shape, layout) &&
      data.size() == static_cast<size_t>(numel()) * dtype_size(dtype))
    return *this;
  HostTensor t = zeros(dtype, shape, layout);
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  const std::byte* src = data.data();
  std::byte* dst = t.data.data();
  auto copy = [&](auto word) {
    using W = decltype(word);
    for_each_offset2(shape, strides, t.strides, [&](int64_t a, int64_t b) {
      W x;
      std::memcpy(&x, src + a * es, sizeof(W));
      std::memcpy(dst + b * es, &x, sizeof(W));
    });
  };
  if (es == 1)
    copy(uint8_t{});
  else if (es == 2)
    copy(uint16_t{});
  else if (es == 4)
    copy(uint32_t{});
  else if (es == 8)
    copy(uint64_t{});
  else
    for_each_offset2(shape, strides, t.strides,
                     [&](int64_t a, int64_t b) { std::memcpy(dst + b * es, src + a * es, es); });
  return t;
}

struct LazyHostTensor::State {
  std::function<HostTensor()> make;
  std::once_flag once;
  std::atomic<bool> made{false};
  HostTensor value;
};

LazyHostTensor::LazyHostTensor(HostTensor t) : state_(std::make_shared<State>()) {
  state_->value = std::move(t);
  std::call_once(state_->once, [] {});
  state_->made = true;
}

LazyHostTensor LazyHostTensor::deferred(std::function<HostTensor()> make) {
  LazyHostTensor l;
  l.state_ = std::make_shared<State>();
  l.state_->make = std::move(make);
  return l;
}

bool LazyHostTensor::materialized() const {
  return state_ && state_->made.load();
}

const HostTensor& LazyHostTensor::value() const {
  KILN_ASSERT(state_ != nullptr, "a constant without data");
  State& s = *state_;
  std::call_once(s.once, [&s] {
    s.value = s.make();
    s.make = nullptr;  // what it captured (a file's header, an init's parameters) is not needed
    s.made = true;
  });
  return s.value;
}

HostTensor& LazyHostTensor::mutable_value() {
  const HostTensor& v = value();
  if (state_.use_count() > 1) *this = LazyHostTensor(HostTensor(v));  // copy on write
  return state_->value;
}

}  // namespace kiln
