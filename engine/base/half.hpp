// Bit-exact f16/bf16 <-> f32 conversions (round to nearest even), shared by host code.
#pragma once

#include <cstdint>

namespace kiln {
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t b);
}  // namespace kiln
