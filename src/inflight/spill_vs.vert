#version 450
// SPDX-License-Identifier: MIT
// A vertex shader with a large private array indexed at run time: the
// compiler puts it in thread-local storage, PRIV_WORDS * 4 bytes per thread
// (a specialization constant), as spill.comp does for compute.
layout(constant_id = 0) const uint PRIV_WORDS = 1024u;
void main()
{
   uint priv[PRIV_WORDS];
   uint v = uint(gl_VertexIndex);
   for (uint i = 0u; i < PRIV_WORDS; i++)
      priv[i] = i * 7u + v;
   uint acc = 0u;
   for (uint i = 0u; i < PRIV_WORDS; i++)
      acc += priv[(i * 13u + acc) % PRIV_WORDS];
   gl_Position = vec4(float(v & 1u), float((v >> 1) & 1u), float(acc & 1u), 1.0);
}
