# SPDX-License-Identifier: MIT
"""`mesa-fork bench`: side-by-side measurements, stock vs fork (and sid's
Mesa where there is one), in one run. Nothing here is a test: it prints
figures and ratios.

Three layers; each module imports only from the layer below (and from
bin/mesafork outside this package, which never imports it back):

  verb.py      bench_verb, what the CLI calls: checks the options and
               runs one measurement
  hk.py        hk: llama.cpp decode on the asahi shim, per token
  panvk.py     panvk: private VA with command buffers in flight, and
               llama.cpp's prefill sweep
  sync.py      sync: llama.cpp under synchronization validation
  ops.py       ops: test-backend-ops on every shim
  anv.py       anv: the memory types and PAT of llama.cpp's buffers
  memory.py    memory: what llama.cpp learns of free and total memory
  macs.py      macs: llama.cpp on modelled 8 and 16 GB Macs
  shaders.py   shaders: what the compilers make of llama.cpp's pipelines
  shim.py      how a driver runs on its drm-shim: the fork's build in a
               prefix or sid's Mesa, in the llama.cpp chroot or on the
               host; the models, regexes and tables measurements share

make_qwen2_model.py is no module: shim.py copies it where the chroot
runs it (python3-gguf writes the qwen2 models).
"""
