#version 450
// SPDX-License-Identifier: MIT
// 32 KiB of workgroup-shared memory (WLS).
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Data { uint v[]; } data;
layout(push_constant) uniform Push { uint n; } pc;
shared uint tile[8192];
void main()
{
   uint l = gl_LocalInvocationIndex;
   for (uint i = l; i < 8192u; i += 256u)
      tile[i] = data.v[(gl_WorkGroupID.x * 8192u + i) % pc.n];
   barrier();
   uint acc = 0u;
   for (uint i = 0u; i < 32u; i++)
      acc += tile[(l * 32u + i) % 8192u];
   data.v[gl_GlobalInvocationID.x % pc.n] = acc;
}
