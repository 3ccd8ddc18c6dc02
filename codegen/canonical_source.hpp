// Kernel sources without graph tensor ids, so that a repeated block (ResNet stages, transformer
// layers) generates one source: one NVRTC compile, one cache entry, one loaded module for all.
#pragma once

#include <string>

namespace kiln {

// In the kernel's own part of `src` (from its "// group N:" header comment or, without one, its
// extern "C" declaration; the device prelude before it is left alone), renames every identifier
// that embeds a graph tensor id — t145, v146, o148, a3_0, v2_0_7 (prefix t, v, o or a, the id,
// then optional _index parts) — to the id's order of first appearance (t_0, v_1, o_2, a_3_0:
// the underscore form cannot collide with an unrenamed name), outside literals and comments; drops
// the group id from the header comment ("// group:"). A consistent rename of local names: the
// kernel computes exactly what it did.
std::string canonical_source(const std::string& src);

// `src` without its comments (outside literals): two kernels whose code differs only in
// comments (node names) are the same kernel.
std::string code_without_comments(const std::string& src);

}  // namespace kiln
