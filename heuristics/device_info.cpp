#include "heuristics/device_info.hpp"

#include <cctype>

#include "engine/base/check.hpp"

namespace kiln {

int parse_arch(const std::string& arch, bool* arch_specific, const std::string& where) {
  auto bad = [&]() {
    KILN_FAIL("{}: expected an arch like sm_80, sm_86, sm_89, sm_90 or sm_90a, found '{}'", where,
              arch);
  };
  if (arch.rfind("sm_", 0) != 0) bad();
  size_t i = 3;
  int v = 0;
  size_t digits = 0;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i]))) {
    v = v * 10 + (arch[i] - '0');
    ++i;
    if (++digits > 3) bad();
  }
  if (digits < 2) bad();
  bool a = false;
  if (i < arch.size()) {
    if (arch[i] != 'a' || i + 1 != arch.size()) bad();
    a = true;
  }
  // The f16/bf16 kernels (mma.sync m16n8k16, bf16 conversions, cp.async) need sm_80.
  if (v < kMinSm)
    KILN_FAIL(
        "{}: kiln needs sm_80 or newer (Ampere: sm_80, sm_86, sm_87; Ada: sm_89; Hopper: "
        "sm_90, sm_90a; and later), found '{}'",
        where, arch);
  if (arch_specific) *arch_specific = a;
  return v;
}

bool cubin_runs_on(const std::string& arch, int device_sm) {
  bool a = false;
  int sm = parse_arch(arch, &a);
  if (a) return sm == device_sm;
  return sm / 10 == device_sm / 10 && sm % 10 <= device_sm % 10;
}

DeviceInfo default_device_info(const std::string& arch) {
  int sm = parse_arch(arch);
  DeviceInfo d;
  d.arch = arch;
  d.sm = sm;
  d.from_device = false;
  if (sm >= 90) {  // H200 SXM
    d.name = "default " + arch + " (H200-like)";
    d.sm_count = 132;
    d.smem_per_block_optin = 227 * 1024;
    d.l2_bytes = 50ll << 20;
    d.mem_bandwidth = 4.8e12;
  } else if (sm == 80) {  // A100 SXM 80GB
    d.name = "default " + arch + " (A100-like)";
    d.sm_count = 108;
    d.smem_per_block_optin = 163 * 1024;
    d.l2_bytes = 40ll << 20;
    d.mem_bandwidth = 2.0e12;
  } else if (sm >= 86) {  // consumer Ampere/Ada (RTX 3090/4090 class)
    d.name = "default " + arch + " (RTX-like)";
    d.sm_count = sm == 89 ? 128 : 82;
    d.smem_per_block_optin = 99 * 1024;
    d.l2_bytes = sm == 89 ? 72ll << 20 : 6ll << 20;
    d.mem_bandwidth = 1.0e12;
  } else {  // Volta/Turing (V100-like)
    d.name = "default " + arch + " (V100-like)";
    d.sm_count = 80;
    d.smem_per_block_optin = 96 * 1024;
    d.l2_bytes = 6ll << 20;
    d.mem_bandwidth = 0.9e12;
  }
  return d;
}

}  // namespace kiln
