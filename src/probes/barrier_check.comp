#version 450
// SPDX-License-Identifier: MIT
// mesa-fork-barrier-probe: counts the elements of v[base .. base + count)
// that do not hold `value`: stale data from before the barrier.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { uint bad; uint pad[3]; uint v[]; } d;
layout(push_constant) uniform Push { uint base; uint count; uint value; uint spin; } pc;
void main()
{
   uint i = gl_GlobalInvocationID.x;
   if (i < pc.count && d.v[pc.base + i] != pc.value)
      atomicAdd(d.bad, 1u);
}
