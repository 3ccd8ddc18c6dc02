// The wgmma instruction of the sm_90a kernels: `kc_wgmma4_n<N>` issues a 64-wide k tile's four
// wgmma.mma_async m64nNk16 (scale-d = 1) in one asm statement (NVRTC's time grows with each
// statement's accumulator operands, so the BN / 2 of them appear once).
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {

std::string wgmma_instruction(int n, bool bf16, bool b_kmajor) {
  Writer w;
  const int regs = n / 2;
  w.open(
      "__device__ __forceinline__ void kc_wgmma4_n{}(const unsigned long long (&da)[4], const "
      "unsigned long long (&db)[4], float (&acc)[1][{}][4]) {{",
      n, n / 8);
  w.line("asm volatile(");
  w.line("    \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"", regs + 8);
  std::string list = "{";
  for (int i = 0; i < regs; ++i) list += fmt::format("{}%{}", i ? ", " : "", i);
  list += "}";
  for (int kk = 0; kk < 4; ++kk)
    w.line(
        "    \"wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {}, %{}, %{}, p, 1, 1, 0, {};\\n\"",
        n, bf16 ? "bf16" : "f16", bf16 ? "bf16" : "f16", list, regs + kk, regs + 4 + kk,
        b_kmajor ? 0 : 1);
  w.line("    \"}}\\n\"");
  std::string outs;
  for (int i = 0; i < regs; ++i)
    outs += fmt::format("{}\"+f\"(acc[0][{}][{}])", i ? ", " : "", i / 4, i % 4);
  w.line("    : {}", outs);
  w.line(
      "    : \"l\"(da[0]), \"l\"(da[1]), \"l\"(da[2]), \"l\"(da[3]), \"l\"(db[0]), \"l\"(db[1]), "
      "\"l\"(db[2]), \"l\"(db[3]), \"n\"(1));");
  w.close();
  return w.str();
}

std::string wgmma_rs_instruction(int n, bool bf16) {
  Writer w;
  const int regs = n / 2;
  w.open(
      "__device__ __forceinline__ void kc_wgmma_rs4_n{}(const unsigned (&a)[4][4], const unsigned "
      "long long (&db)[4], float (&acc)[1][{}][4]) {{",
      n, n / 8);
  w.line("asm volatile(");
  w.line("    \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"", regs + 20);
  std::string list = "{";
  for (int i = 0; i < regs; ++i) list += fmt::format("{}%{}", i ? ", " : "", i);
  list += "}";
  for (int kk = 0; kk < 4; ++kk) {
    const int a0 = regs + 4 * kk;
    w.line(
        "    \"wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {}, {{%{}, %{}, %{}, %{}}}, %{}, "
        "p, "
        "1, 1, 1;\\n\"",
        n, bf16 ? "bf16" : "f16", bf16 ? "bf16" : "f16", list, a0, a0 + 1, a0 + 2, a0 + 3,
        regs + 16 + kk);
  }
  w.line("    \"}}\\n\"");
  std::string outs;
  for (int i = 0; i < regs; ++i)
    outs += fmt::format("{}\"+f\"(acc[0][{}][{}])", i ? ", " : "", i / 4, i % 4);
  w.line("    : {}", outs);
  std::string ins;
  for (int i = 0; i < 16; ++i) ins += fmt::format("\"r\"(a[{}][{}]), ", i / 4, i % 4);
  w.line("    : {}\"l\"(db[0]), \"l\"(db[1]), \"l\"(db[2]), \"l\"(db[3]), \"n\"(1));", ins);
  w.close();
  return w.str();
}

}  // namespace kiln::contraction
