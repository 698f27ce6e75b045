// SPDX-License-Identifier: MIT
// mesa-fork-fastpath-probe: 16-bit float arithmetic as ggml-vulkan's fp16
// shaders use it (scalar and vec2 multiply-add, ldexp, 2x16 pack/unpack).
// Inputs and outputs are words of one storage buffer: x and y in word i,
// z in word 64 + i, the exponent in word 128 + i; results in words
// 256 + 2i and 256 + 2i + 1.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { uint v[]; };

void main()
{
   uint i = gl_GlobalInvocationID.x;
   f16vec2 xy = unpackFloat2x16(v[i]);
   float16_t z = unpackFloat2x16(v[64 + i]).x;
   int e = int(v[128 + i]);

   float16_t mad = xy.x * xy.y + z;
   float16_t scaled = ldexp(xy.x, e);
   f16vec2 products = xy * f16vec2(z, xy.x);

   v[256 + 2 * i] = packFloat2x16(f16vec2(mad, scaled));
   v[256 + 2 * i + 1] = packFloat2x16(products);
}
