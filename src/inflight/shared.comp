#version 450
// SPDX-License-Identifier: MIT
// SHARED_WORDS * 4 bytes (by default 32 KiB) of workgroup-shared memory
// (WLS), with a local size of LOCAL_SIZE (by default 256); both are
// specialization constants.
layout(local_size_x_id = 1) in;
layout(std430, set = 0, binding = 0) buffer Data { uint v[]; } data;
layout(push_constant) uniform Push { uint n; } pc;
layout(constant_id = 1) const uint LOCAL_SIZE = 256u;
layout(constant_id = 2) const uint SHARED_WORDS = 8192u;
shared uint tile[SHARED_WORDS];
void main()
{
   uint l = gl_LocalInvocationIndex;
   for (uint i = l; i < SHARED_WORDS; i += LOCAL_SIZE)
      tile[i] = data.v[(gl_WorkGroupID.x * SHARED_WORDS + i) % pc.n];
   barrier();
   uint acc = 0u;
   for (uint i = 0u; i < 32u; i++)
      acc += tile[(l * 32u + i) % SHARED_WORDS];
   data.v[gl_GlobalInvocationID.x % pc.n] = acc;
}
