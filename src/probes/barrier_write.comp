#version 450
// SPDX-License-Identifier: MIT
// mesa-fork-barrier-probe: after `spin` rounds of arithmetic, so that it is
// still running when the launches behind it start, writes `value` into
// v[base .. base + count).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { uint bad; uint pad[3]; uint v[]; } d;
layout(push_constant) uniform Push { uint base; uint count; uint value; uint spin; } pc;
void main()
{
   uint i = gl_GlobalInvocationID.x;
   if (i >= pc.count)
      return;
   uint x = i ^ pc.value;
   for (uint k = 0u; k < pc.spin; k++)
      x = x * 1664525u + 1013904223u;
   // Never true for the spins the probe uses; keeps the loop alive.
   d.v[pc.base + i] = pc.value + ((pc.spin == 0xffffffffu && x == 0u) ? 1u : 0u);
}
