// SPDX-License-Identifier: MIT
// mesa-fork-fastpath-probe: four neighbouring 32-bit loads of a storage
// buffer at a 16-byte aligned word, as llama.cpp's quantized mat-vecs read
// their blocks; panvk merges them into one 128-bit load where the pipeline
// asks no robust buffer access (PANVK_VECTORIZE_SSBO). Invocation i reads
// words 4i .. 4i + 3 and writes one weighted sum to word 256 + i.
#version 450

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { uint v[]; };

void main()
{
   uint i = gl_GlobalInvocationID.x;
   uint b = 4 * i;
   v[256 + i] = v[b] + 3u * v[b + 1] + 5u * v[b + 2] + 7u * v[b + 3];
}
