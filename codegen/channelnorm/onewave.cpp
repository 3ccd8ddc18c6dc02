// The one-wave cluster channel norm's L2 half (see cluster_kernel.hpp): the iterations past
// those in shared memory, read into registers for the statistics after the copies have landed,
// and read again from L2 for the stores, four loads in flight per thread.
#include "codegen/channelnorm/cluster_kernel.hpp"

namespace kiln {

void ClusterKernel::open_l2_batches(const char* i, int64_t lo, int64_t hi, int unroll,
                                    bool need_p) {
  w_.line("#pragma unroll {}", unroll);
  w_.open("for (int {0} = {1}; {0} < {2}; {0} += 4) {{", i, lo, hi);
  w_.line("uint4 r[4];");
  w_.line("#pragma unroll");
  w_.open("for (int k = 0; k < 4; ++k) {{");
  w_.line("const int p = ({} + k) * {} + pr;", i, l_.rows);
  w_.line(
      "if ({}{} + k < {}) r[k] = kiln_ld16_plain({} + gbase0 + static_cast<long long>(p) * {});",
      guard_, i, hi, xp_, cn_.C);
  w_.close();
  w_.line("#pragma unroll");
  w_.open("for (int k = 0; k < 4; ++k) {{");
  if (need_p) w_.line("const int p = ({} + k) * {} + pr;", i, l_.rows);
  w_.line("if (!({}{} + k < {})) break;", guard_, i, hi);
}

// The L2 half's statistics, four loads in flight per thread, after the copies have landed: its
// loads issued together with the copies make the load phase longer (docs/PERFORMANCE.md).
void ClusterKernel::l2_statistics() {
  w_.line("// iterations {}..{}: from global memory now, and again for the stores (from L2)",
          l_.smem_iters, l_.iters - 1);
  open_l2_batches("i", l_.smem_iters, l_.iters, 4, !guard_.empty());
  w_.line("float v[{}];", V_);
  w_.line("kiln_unpack16(r[k], {}, v);", xp_);
  accumulate();
  w_.close();
  w_.close();
}

}  // namespace kiln
