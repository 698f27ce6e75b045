#version 450
// SPDX-License-Identifier: MIT
// Writes index * mul into every element: a result the client can check.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) writeonly buffer Out { uint v[]; } dst;
layout(push_constant) uniform Push { uint mul; uint count; } pc;
void main()
{
   uint i = gl_GlobalInvocationID.x;
   if (i < pc.count)
      dst.v[i] = i * pc.mul;
}
