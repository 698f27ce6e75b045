# SPDX-License-Identifier: MIT
"""Writes a random-weight qwen2 GGUF with Qwen2.5-3B's layer shapes (embedding
2048, feed-forward 11008, 16 heads, 2 KV heads) and a chosen number of
layers, in F16, with the small tokenizer of a model made by
test-llama-archs. Runs inside the sid chroot, where python3-gguf lives.
With "repeat", every block holds the same random weights: a model of many
GiB written in seconds, for measurements that only load it.

   python3 make_qwen2_model.py TOKENIZER_SOURCE.gguf OUT.gguf [LAYERS [repeat]]
"""

import sys

import gguf
import numpy as np

EMBD, FFN, HEADS, KV_HEADS, HEAD_DIM = 2048, 11008, 16, 2, 128


def copy_tokenizer(reader, writer):
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            if len(field.types) < 2:
                # An empty array (no merges), which GGUFWriter cannot write.
                continue
            writer.add_key_value(key, field.contents(), gguf.GGUFValueType.ARRAY,
                                 sub_type=field.types[1])
        else:
            writer.add_key_value(key, field.contents(), field.types[0])


def main():
    src, out = sys.argv[1], sys.argv[2]
    layers = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    repeat = sys.argv[4:] == ["repeat"]
    if sys.argv[4:] and not repeat:
        sys.exit("make_qwen2_model.py: the fourth argument can only be 'repeat'")
    reader = gguf.GGUFReader(src)
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    rng = np.random.default_rng(1234)

    drawn = {}

    def w(*shape):
        if repeat and shape in drawn:
            return drawn[shape]
        drawn[shape] = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)
        return drawn[shape]

    def ones(n):
        return np.ones(n, dtype=np.float32)

    writer = gguf.GGUFWriter(out, "qwen2")
    writer.add_name("random qwen2, Qwen2.5-3B shapes")
    writer.add_context_length(4096)
    writer.add_embedding_length(EMBD)
    writer.add_feed_forward_length(FFN)
    writer.add_block_count(layers)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(1000000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    copy_tokenizer(reader, writer)

    # numpy shapes are (rows, cols) = GGUF's (ne1, ne0)
    writer.add_tensor("token_embd.weight", w(vocab, EMBD))
    writer.add_tensor("output_norm.weight", ones(EMBD))
    writer.add_tensor("output.weight", w(vocab, EMBD))
    kv = KV_HEADS * HEAD_DIM
    for i in range(layers):
        p = "blk.%d." % i
        writer.add_tensor(p + "attn_norm.weight", ones(EMBD))
        writer.add_tensor(p + "attn_q.weight", w(EMBD, EMBD))
        writer.add_tensor(p + "attn_q.bias", np.zeros(EMBD, dtype=np.float32))
        writer.add_tensor(p + "attn_k.weight", w(kv, EMBD))
        writer.add_tensor(p + "attn_k.bias", np.zeros(kv, dtype=np.float32))
        writer.add_tensor(p + "attn_v.weight", w(kv, EMBD))
        writer.add_tensor(p + "attn_v.bias", np.zeros(kv, dtype=np.float32))
        writer.add_tensor(p + "attn_output.weight", w(EMBD, EMBD))
        writer.add_tensor(p + "ffn_norm.weight", ones(EMBD))
        writer.add_tensor(p + "ffn_gate.weight", w(FFN, EMBD))
        writer.add_tensor(p + "ffn_up.weight", w(FFN, EMBD))
        writer.add_tensor(p + "ffn_down.weight", w(EMBD, FFN))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
