// A 128-bit content hash for cache keys: two independent 64-bit streams (FNV-1a and a
// multiply-rotate stream with different constants), each finished with a murmur3 fmix64 over the
// length. Fields are length-prefixed so that ("ab","c") and ("a","bc") differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

inline uint64_t hash_rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
// murmur3's 64-bit finalizer: every input bit affects every output bit.
inline uint64_t hash_fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

class Hasher {
 public:
  Hasher& bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      a_ = (a_ ^ p[i]) * 0x100000001b3ull;
      b_ = rotl(b_ ^ (p[i] * 0x9e3779b97f4a7c15ull), 27) * 0xc2b2ae3d27d4eb4full +
           0x165667b19e3779f9ull;
    }
    len_ += n;
    return *this;
  }
  Hasher& u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    return bytes(b, 8);
  }
  // A length-prefixed field.
  Hasher& field(std::string_view s) {
    u64(s.size());
    return bytes(s.data(), s.size());
  }

  uint64_t hi() const { return fmix(a_ ^ len_); }
  uint64_t lo() const { return fmix(b_ ^ (len_ * 0xff51afd7ed558ccdull)); }
  uint64_t digest64() const { return hi() ^ rotl(lo(), 17); }
  // 32 lowercase hex digits.
  std::string hex() const {
    static const char* d = "0123456789abcdef";
    std::string s(32, '0');
    uint64_t h = hi(), l = lo();
    for (int i = 0; i < 16; ++i) {
      s[15 - i] = d[h & 15];
      s[31 - i] = d[l & 15];
      h >>= 4;
      l >>= 4;
    }
    return s;
  }

 private:
  static uint64_t rotl(uint64_t x, int r) { return hash_rotl(x, r); }
  static uint64_t fmix(uint64_t k) { return hash_fmix64(k); }

  uint64_t a_ = 0xcbf29ce484222325ull;  // FNV-1a offset basis
  uint64_t b_ = 0x84222325cbf29ce4ull;
  uint64_t len_ = 0;
};

inline uint64_t hash64(const void* data, size_t n) {
  return Hasher().bytes(data, n).digest64();
}
inline std::string hash_hex(std::string_view s) {
  return Hasher().field(s).hex();
}

}  // namespace kiln
