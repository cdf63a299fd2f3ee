"""The models of the resharded end-to-end test: families.py's tiny configs,
changed where the default would hide a sharding convention.

- qwen3: 8 query heads in 4 KV groups (head_dim 8), so each of 2 TP ranks
  holds two query groups and Megatron's per-group interleaving of
  linear_qkv differs from vLLM's [q; k; v]; 4 layers, so pipeline stage 1's
  local layers 0, 1 are global layers 2, 3; tied embeddings, so Megatron's
  last stage holds its own output_layer copy and vLLM no lm_head.
- qwen3_moe: the family as is (one KV group per TP rank), stacked experts.
- qwen2: q/k/v biases, interleaved like their weights; 4 KV groups.
Every model has 300 tokens, which Megatron pads to 512 (128 x tp) and
vLLM to 320 (64): the two engines' vocabulary shards differ.
"""
import json

TP, PP, DP = 2, 2, 2  # Megatron tp x pp trainer; vLLM tp x dp engines

VOCAB = 300
GQA4 = dict(num_attention_heads=8, num_key_value_heads=4)
VARIANTS = {
    "qwen3": dict(GQA4, head_dim=8, num_hidden_layers=4,
                  tie_word_embeddings=True),
    "qwen3_moe": dict(),
    "qwen2": dict(GQA4),
}
MODELS = sorted(VARIANTS)


def write_config(model, directory):
    """families.write_config, with the model's changes: the config.json
    path."""
    import families  # transformers: only where a model is built
    path = families.write_config(model, directory)
    with open(path) as f:
        doc = json.load(f)
    doc.update(VARIANTS[model], vocab_size=VOCAB)
    if "layer_types" in doc:  # one per layer (all full attention here)
        doc["layer_types"] = doc["layer_types"][:1] * doc["num_hidden_layers"]
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def read_config(path):
    """config.json as the reference slicers read it: the expert count
    under num_experts, where transformers 5 writes num_local_experts."""
    with open(path) as f:
        doc = json.load(f)
    if "num_local_experts" in doc and "num_experts" not in doc:
        doc["num_experts"] = doc["num_local_experts"]
    return doc
