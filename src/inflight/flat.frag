#version 450
// SPDX-License-Identifier: MIT
// One colour: the draw of mesa-fork-inflight --draw-kib needs no more.
layout(location = 0) out vec4 color;
void main()
{
   color = vec4(0.25, 0.5, 0.75, 1.0);
}
