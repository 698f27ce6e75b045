#version 450
// SPDX-License-Identifier: MIT
// A large private array indexed at run time: the compiler puts it in
// thread-local storage, PRIV_WORDS * 4 bytes per thread (a specialization
// constant).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { uint v[]; } data;
layout(push_constant) uniform Push { uint n; } pc;
layout(constant_id = 0) const uint PRIV_WORDS = 4096u;
void main()
{
   uint priv[PRIV_WORDS];
   uint x = gl_GlobalInvocationID.x;
   for (uint i = 0u; i < PRIV_WORDS; i++)
      priv[i] = data.v[(i * 7u + x) % pc.n];
   uint acc = 0u;
   for (uint i = 0u; i < PRIV_WORDS; i++)
      acc += priv[(i * 13u + acc) % PRIV_WORDS];
   data.v[x % pc.n] = acc;
}
