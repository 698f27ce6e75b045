#version 450
// SPDX-License-Identifier: MIT
// Both kinds of scratch in one shader: a private array indexed at run time
// (thread-local storage, PRIV_WORDS * 4 bytes per thread) and
// SHARED_WORDS * 4 bytes of workgroup-shared memory, with a local size of
// LOCAL_SIZE. The specialization constants are those of spill.comp and
// shared.comp.
layout(local_size_x_id = 1) in;
layout(std430, set = 0, binding = 0) buffer Data { uint v[]; } data;
layout(push_constant) uniform Push { uint n; } pc;
layout(constant_id = 0) const uint PRIV_WORDS = 4096u;
layout(constant_id = 1) const uint LOCAL_SIZE = 256u;
layout(constant_id = 2) const uint SHARED_WORDS = 8192u;
shared uint tile[SHARED_WORDS];
void main()
{
   uint l = gl_LocalInvocationIndex;
   uint x = gl_GlobalInvocationID.x;
   for (uint i = l; i < SHARED_WORDS; i += LOCAL_SIZE)
      tile[i] = data.v[(gl_WorkGroupID.x * SHARED_WORDS + i) % pc.n];
   barrier();
   uint priv[PRIV_WORDS];
   for (uint i = 0u; i < PRIV_WORDS; i++)
      priv[i] = tile[(i * 7u + l) % SHARED_WORDS];
   uint acc = 0u;
   for (uint i = 0u; i < PRIV_WORDS; i++)
      acc += priv[(i * 13u + acc) % PRIV_WORDS];
   data.v[x % pc.n] = acc;
}
