#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a SPIR-V binary as a C header holding `static const uint32_t
NAME[]`, as glslangValidator --vn does for GLSL (for modules assembled
with spirv-as)."""

import struct
import sys


def main():
    src, out, name = sys.argv[1:4]
    data = open(src, "rb").read()
    if len(data) % 4 or len(data) < 20 or struct.unpack_from("<I", data)[0] != 0x07230203:
        sys.exit("%s: not a little-endian SPIR-V module" % src)
    words = struct.unpack("<%dI" % (len(data) // 4), data)
    with open(out, "w") as f:
        f.write("/* Generated from %s by spv_header.py. */\n#pragma once\n#include <stdint.h>\n"
                % src.rsplit("/", 1)[-1])
        f.write("static const uint32_t %s[] = {\n" % name)
        for i in range(0, len(words), 6):
            f.write("   " + " ".join("0x%08x," % w for w in words[i:i + 6]) + "\n")
        f.write("};\n")


if __name__ == "__main__":
    main()
