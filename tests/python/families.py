"""Tiny configs of every model family wex knows, as transformers builds
them: a few layers, a small vocabulary, every feature the family has
(q/k/v bias, q/k norms, experts, MLA), so a model builds and trains on a
CPU in a fraction of a second."""
import json
import os

import torch
import transformers

DENSE = dict(vocab_size=256, hidden_size=64, intermediate_size=96,
             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             tie_word_embeddings=False)


def configs():
    """family name -> a transformers config."""
    t = transformers
    return {
        "llama": t.LlamaConfig(**DENSE),
        "qwen2": t.Qwen2Config(**DENSE),  # q/k/v projections with bias
        "qwen3": t.Qwen3Config(head_dim=16, **DENSE),  # q/k norms
        "qwen3_moe": t.Qwen3MoeConfig(head_dim=16, moe_intermediate_size=32,
                                      num_experts=4, num_experts_per_tok=2,
                                      decoder_sparse_step=1, **DENSE),
        "mixtral": t.MixtralConfig(num_local_experts=4, num_experts_per_tok=2,
                                   **DENSE),
        # MLA attention, one dense layer, then routed + shared experts
        "deepseek_v3": t.DeepseekV3Config(
            vocab_size=256, hidden_size=64, intermediate_size=96,
            moe_intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
            n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1,
            q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16,
            qk_rope_head_dim=8, v_head_dim=16, n_group=2, topk_group=1,
            tie_word_embeddings=False, num_nextn_predict_layers=0),
    }


FAMILIES = sorted(configs())

# what this transformers' models hold: the hf and fsdp engines' "modules"
MODULES = "transformers-%s" % transformers.__version__.split(".")[0]


def _expert_names(mixtral):
    return ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj",
                                               "down_proj")


def checkpoint_state(state, mixtral=False):
    """A model's state dict under the checkpoint's names, whatever the
    transformers: 5.x's stacked experts as each expert's weights
    (conversion_mapping.py: gate_up_proj[e] is the gate rows, then the up
    rows; down_proj[e] is w2), Mixtral's mlp as block_sparse_moe. Views,
    no copies; as it is under 4.x."""
    gate, up, down = _expert_names(mixtral)
    out = {}
    for name, t in state.items():
        if mixtral and ".mlp." in name:
            name = name.replace(".mlp.", ".block_sparse_moe.")
        stem, _, leaf = name.rpartition(".experts.")
        if leaf == "gate_up_proj":
            rows = t.shape[1] // 2
            for e in range(t.shape[0]):
                out["%s.experts.%d.%s.weight" % (stem, e, gate)] = t[e, :rows]
                out["%s.experts.%d.%s.weight" % (stem, e, up)] = t[e, rows:]
        elif leaf == "down_proj":
            for e in range(t.shape[0]):
                out["%s.experts.%d.%s.weight" % (stem, e, down)] = t[e]
        else:
            out[name] = t
    return out


def model_state(checkpoint, model, mixtral=False):
    """The inverse for `model`: a state dict under the checkpoint's names
    as `model` names its tensors (stacking the experts where it stacks
    them), for load_state_dict."""
    gate, up, down = _expert_names(mixtral)
    out = {}
    for name in model.state_dict():
        ck = name.replace(".mlp.", ".block_sparse_moe.") if mixtral else name
        stem, _, leaf = ck.rpartition(".experts.")
        if leaf in ("gate_up_proj", "down_proj"):
            n = sum(1 for k in checkpoint
                    if k.startswith(stem + ".experts.") and
                    k.endswith("." + down + ".weight"))
            parts = [(gate, up)] if leaf == "gate_up_proj" else [(down,)]
            out[name] = torch.stack([torch.cat([
                checkpoint["%s.experts.%d.%s.weight" % (stem, e, w)]
                for w in parts[0]]) for e in range(n)])
        else:
            out[name] = checkpoint[ck]
    return out


def write_config(family, directory):
    """Writes the family's config.json (bf16, with its architecture) into
    `directory` and returns its path: what a wex job's "model" names."""
    config = configs()[family]
    config.architectures = [transformers.AutoModelForCausalLM
                            .from_config(config).__class__.__name__]
    config.dtype = torch.bfloat16
    os.makedirs(directory, exist_ok=True)
    config.save_pretrained(directory)
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        doc = json.load(f)
    doc.setdefault("torch_dtype", "bfloat16")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def build(config_path, seed):
    """The family's model from its config.json, randomly initialised from
    `seed`, in the checkpoint's dtypes: bf16, except the tensors the
    checkpoint keeps in float32 (DeepSeek-V3's e_score_correction_bias),
    as from_pretrained keeps them."""
    config = transformers.AutoConfig.from_pretrained(
        os.path.dirname(config_path))
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.bfloat16)
    for name, buf in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            buf.data = buf.data.float()
    # transformers 5 keeps DeepSeek's router weight in float32 whatever the
    # dtype asked; loaded from a bf16 checkpoint it holds bf16 values, as
    # here.
    for param in model.parameters():
        if param.dtype == torch.float32:
            param.data = param.data.bfloat16().float()
    return model
