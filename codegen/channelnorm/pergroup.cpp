// The per-group channel norm, the form every shape can take: one CTA per (n, group). Pass 1
// accumulates shifted sums (x - x0) and (x - x0)^2 (x0 = the group's first element, which keeps
// the variance free of cancellation for data with a large mean) and reduces them over the CTA;
// pass 2 re-reads the group, normalizes, applies the per-channel affine and the epilogue, and
// stores. A group is at most a few hundred KB and the CTAs resident at once cover far less than
// the 50-60 MB L2 of an H100/H200, so the second read is served from L2: DRAM sees the input
// once. Elements are walked in memory order (NHWC: the group's channels of one pixel, then the
// next pixel; NCHW: one contiguous block), so adjacent threads touch adjacent addresses
// ("..._g32_pergroup_...").
#include "codegen/channelnorm/channelnorm_group.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {
namespace {

class PerGroupKernel {
 public:
  PerGroupKernel(const ChannelNormGroup& cn, int threads)
      : cn_(cn), T_(threads), gp_(cn.g, cn.grp), dp_(gp_.dims) {}

  KernelSpec emit() {
    const Dim M = cn_.S * Dim(cn_.Cg);
    Mr_ = dp_.ref(M);
    Sr_ = dp_.ref(cn_.S);
    // 32-bit element index within the group when it fits: the coordinate div/mod by static
    // channel and spatial sizes become a multiply-high each instead of a 64-bit division
    // sequence.
    eidx_ = M.is_static() && M.value() < (int64_t{1} << 31) ? "int" : "long long";
    w_.line("__shared__ float kiln_red[33];");
    w_.line("const long long n = blockIdx.x / {};", cn_.G);
    w_.line("const int grp = blockIdx.x % {};", cn_.G);
    statistics();
    normalize();
    GroupKernel k = cn_.kernel(fmt::format("g{}_pergroup", cn_.G), "", false);
    k.threads = T_;
    k.grid = cn_.X[0] * Dim(cn_.G);
    return group_kernel_spec(k, gp_, w_.str());
  }

 private:
  // Coordinates of group element e.
  std::vector<std::string> coords(const std::string& e) {
    std::vector<std::string> c(cn_.r, "0");
    c[0] = "n";
    std::string cl, sidx;
    if (cn_.Cg == 1) {
      cl = "0";
      sidx = e;
    } else if (cn_.channels_last) {
      cl = fmt::format("({} % {})", e, cn_.Cg);
      sidx = fmt::format("({} / {})", e, cn_.Cg);
    } else {
      cl = fmt::format("({} / {})", e, Sr_);
      sidx = fmt::format("({} % {})", e, Sr_);
    }
    c[1] = fmt::format("(grp * {} + {})", cn_.Cg, cl);
    auto sc = decompose(sidx, cn_.spatial, row_major_strides(cn_.spatial), dp_);
    for (size_t k = 0; k < sc.size(); ++k) c[2 + k] = sc[k];
    return c;
  }

  // Pass 1: the shift, the shifted sums, mean and rstd.
  void statistics() {
    std::map<int, std::string> vals;
    w_.line("float shift;");
    w_.open("{{");
    {
      w_.line("const {} e = 0;", eidx_);
      ElementLoader ld{cn_.g, cn_.X, Shape{}, "", coords("e"), &dp_, "", {}};
      w_.line("shift = {};", cn_.element(w_, ld, &vals, false));
    }
    w_.close();
    w_.line("float s1 = 0.0f, s2 = 0.0f;");
    // Unrolled so that several independent loads are in flight per thread.
    w_.line("#pragma unroll 4");
    w_.open("for ({} e = threadIdx.x; e < {}; e += {}) {{", eidx_, Mr_, T_);
    {
      ElementLoader ld{cn_.g, cn_.X, Shape{}, "", coords("e"), &dp_, "", {}};
      w_.line("const float d = {} - shift;", cn_.element(w_, ld, &vals, false));
      w_.line("s1 += d;");
      w_.line("s2 += d * d;");
    }
    w_.close();
    w_.line("s1 = kiln_block_sum<{}>(s1, kiln_red);", T_);
    w_.line("s2 = kiln_block_sum<{}>(s2, kiln_red);", T_);
    w_.line("const float inv_m = 1.0f / static_cast<float>({});", Mr_);
    w_.line("const float dm = s1 * inv_m;");
    w_.line("const float mean = shift + dm;");
    w_.line("const float rstd = rsqrtf(fmaxf(s2 * inv_m - dm * dm, 0.0f) + {});",
            cuda_float(cn_.A.attr_float("eps")));
  }

  // Pass 2: normalize, affine, epilogue, stores.
  void normalize() {
    w_.line("#pragma unroll 4");
    w_.open("for ({} e = threadIdx.x; e < {}; e += {}) {{", eidx_, Mr_, T_);
    ElementLoader ld{cn_.g, cn_.X, Shape{}, "", coords("e"), &dp_, "", {}};
    std::map<int, std::string> seed;
    std::string v = cn_.element(w_, ld, &seed, true);
    std::string y = fmt::format("({} - mean) * rstd", v);
    if (cn_.A.inputs.size() > 1)
      y = fmt::format("{} * {}", y, cn_.channel_param(1, ld.coords, dp_));
    if (cn_.A.inputs.size() > 2)
      y = fmt::format("{} + {}", y, cn_.channel_param(2, ld.coords, dp_));
    w_.line("const float y = {};", y);
    seed[cn_.out_t] = "y";
    cn_.outputs(w_, ld, seed, {}, true);
    w_.close();
  }

  const ChannelNormGroup& cn_;
  const int T_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  std::string Mr_, Sr_;
  const char* eidx_ = "int";
};

}  // namespace

KernelSpec emit_channelnorm_pergroup(const ChannelNormGroup& cn, int threads) {
  return PerGroupKernel(cn, threads).emit();
}

}  // namespace kiln
