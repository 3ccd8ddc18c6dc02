// The conv_transpose2d layout rules (heuristics/conv_transpose_layout.hpp).
#include "heuristics/conv_transpose_layout.hpp"

#include <initializer_list>
#include <numeric>

namespace kiln {

ConvTransposeTaps conv_transpose_taps(int64_t stride, int64_t dilation) {
  ConvTransposeTaps t;
  t.gcd = std::gcd(stride, dilation);
  t.step = stride / t.gcd;
  const int64_t d = (dilation / t.gcd) % t.step;
  for (int64_t i = 1; i < t.step; ++i)
    if (d * i % t.step == 1) t.inverse = i;
  return t;
}

ConvTransposeLayout choose_conv_transpose_layout(const ConvTransposeShape& s) {
  ConvTransposeLayout l;
  l.channel_fastest = s.channels_last;
  // Several channels per thread share each input load (a load per channel-group input value
  // instead of one per output); channels-last outputs keep one, so that a warp's stores are
  // contiguous. Enough channels remain for every lane of a warp to have work.
  if (!s.channels_last) {
    for (int c : {4, 2})
      if (s.kg % c == 0 && s.kg >= 2 * c) {
        l.channels_per_thread = c;
        break;
      }
  }
  // Small problems: smaller CTAs spread over more SMs.
  const int64_t work = s.outputs < 0 ? -1 : s.outputs / l.channels_per_thread;
  l.threads = work >= 0 && work < 64 * 256 ? 128 : 256;
  l.taps_h = conv_transpose_taps(s.stride_h, s.dil_h);
  l.taps_w = conv_transpose_taps(s.stride_w, s.dil_w);
  return l;
}

}  // namespace kiln
