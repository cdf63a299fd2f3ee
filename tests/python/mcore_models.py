"""Real Megatron-Core models of a Hugging Face config.json, on the CPU, for
the Megatron-Core goldens (test_megatron_core.py, mcore_ranks.py).

``build(config, dtype, parallel)`` builds the ``GPTModel`` this process's
rank of the current ``parallel_state`` holds, with Megatron-Core's local
layer spec (``get_gpt_decoder_block_spec(..., use_transformer_engine=
False)``): Transformer Engine needs a GPU. The local spec keeps the layer
norms that Transformer Engine fuses into the following linear as modules
of their own; ``te_names`` maps its names to the ones wex's ``megatron``
engine lays out (Transformer Engine's), as docs/cli.md documents:

- ``input_layernorm.weight`` is ``self_attention.linear_qkv.layer_norm_weight``
  (TELayerNormColumnParallelLinear), except with multi-latent attention,
  whose first projections are not layer-norm fused: both specs keep
  ``input_layernorm``;
- ``pre_mlp_layernorm.weight`` of a dense MLP is
  ``mlp.linear_fc1.layer_norm_weight``; a MoE layer keeps
  ``pre_mlp_layernorm`` under both specs;
- MLA's ``self_attention.q_layernorm`` / ``kv_layernorm`` are
  ``linear_q_up_proj.layer_norm_weight`` / ``linear_kv_up_proj
  .layer_norm_weight``.

(``megatron/core/models/gpt/gpt_layer_specs.py`` of megatron-core 0.16.1:
``get_gpt_layer_with_transformer_engine_spec`` sets ``input_layernorm`` and
``pre_mlp_layernorm`` to IdentityOp where the linear fuses them, and
``get_gpt_layer_local_spec`` to LNImpl, mapping the first two in its
``sharded_state_dict_keys_map``.) Under MLA, ``build`` holds the down
projections whole as Transformer Engine does and stands in for the core
attention the local spec cannot build (see there): such a model is for
layouts only.

Megatron-Core is written for a GPU; ``run_on_cpu()`` (which ``build``
calls) makes it build and run on the CPU: ``torch.cuda.current_device()``
names the CPU (rotary embeddings, MLA's among them, put their frequencies
there), ``Tensor.cuda()`` leaves a tensor where it is (the last stage's
copy of tied embeddings is moved there before its all-reduce), and the
model-parallel RNG tracker forks nothing (dropout is off in these models:
eval mode, rates 0). Callers pass the causal mask themselves, since
Megatron's default one is allocated on "cuda".
"""
import contextlib
import json
import os

import torch
import torch.nn.functional as F

VOCAB_MULTIPLE = 128  # make_vocab_size_divisible_by, Megatron's default


def read_config(path):
    with open(path) as f:
        doc = json.load(f)
    if "num_local_experts" in doc and "num_experts" not in doc:
        doc["num_experts"] = doc["num_local_experts"]
    return doc


def padded_vocab(vocab, tp):
    multiple = VOCAB_MULTIPLE * tp
    return -(-vocab // multiple) * multiple


def moe_layers(config):
    """Megatron's moe_layer_freq pattern: 1 for a MoE layer, as the Hugging
    Face model decides it."""
    n = config["num_hidden_layers"]
    if config.get("model_type") == "deepseek_v3":
        first = config.get("first_k_dense_replace", 0)
        return [0 if i < first else 1 for i in range(n)]
    if not config.get("num_experts"):
        return [0] * n
    step = config.get("decoder_sparse_step", 1)
    only = config.get("mlp_only_layers") or []
    return [0 if i in only or (i + 1) % step else 1 for i in range(n)]


def transformer_config(config, dtype, parallel):
    """Megatron-Core's TransformerConfig of a Hugging Face config dict, for
    the parallel config `parallel` (tp, pp, ep, etp)."""
    from megatron.core.transformer.transformer_config import (
        MLATransformerConfig, TransformerConfig)

    tp = parallel.get("tp", 1)
    kind = config["model_type"]
    args = dict(
        num_layers=config["num_hidden_layers"],
        hidden_size=config["hidden_size"],
        num_attention_heads=config["num_attention_heads"],
        ffn_hidden_size=config["intermediate_size"],
        normalization="RMSNorm", layernorm_epsilon=config["rms_norm_eps"],
        gated_linear_unit=True, activation_func=F.silu,
        add_bias_linear=False, qk_layernorm=kind != "qwen2",
        params_dtype=dtype, bf16=dtype == torch.bfloat16,
        pipeline_dtype=dtype, use_cpu_initialization=True,
        hidden_dropout=0.0, attention_dropout=0.0,
        bias_dropout_fusion=False, apply_rope_fusion=False,
        masked_softmax_fusion=False, gradient_accumulation_fusion=False,
        persist_layer_norm=False,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=parallel.get("pp", 1),
        expert_model_parallel_size=parallel.get("ep", 1),
        expert_tensor_parallel_size=parallel.get("etp", tp))
    if any(moe_layers(config)):
        args.update(
            num_moe_experts=config.get("num_experts") or
            config["n_routed_experts"],
            moe_ffn_hidden_size=config["moe_intermediate_size"],
            moe_router_topk=config["num_experts_per_tok"],
            moe_layer_freq=moe_layers(config),
            # Qwen3-MoE renormalises its top-k softmax weights with
            # norm_topk_prob: Megatron's softmax over the top-k logits;
            # without, a softmax over all experts before the top-k
            moe_router_pre_softmax=not config.get("norm_topk_prob", True),
            moe_token_dispatcher_type="allgather",
            moe_aux_loss_coeff=0.0, moe_router_load_balancing_type="none")
    if kind == "deepseek_v3":
        args.update(
            q_lora_rank=config["q_lora_rank"],
            kv_lora_rank=config["kv_lora_rank"],
            qk_head_dim=config["qk_nope_head_dim"],
            qk_pos_emb_head_dim=config["qk_rope_head_dim"],
            v_head_dim=config["v_head_dim"], rope_type="rope",
            moe_shared_expert_intermediate_size=config["n_shared_experts"] *
            config["moe_intermediate_size"],
            moe_router_score_function="sigmoid",
            moe_router_enable_expert_bias=True,
            mtp_num_layers=config.get("num_nextn_predict_layers") or None)
        return MLATransformerConfig(**args)
    if kind not in ("qwen2", "qwen3", "qwen3_moe"):
        raise NotImplementedError("no Megatron-Core config for %r" % kind)
    args.update(num_query_groups=config["num_key_value_heads"],
                kv_channels=config.get("head_dim") or
                config["hidden_size"] // config["num_attention_heads"],
                add_qkv_bias=kind == "qwen2")
    return TransformerConfig(**args)


def build(config, dtype, parallel):
    """This rank's GPTModel (parallel_state already initialised)."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import (
        get_gpt_decoder_block_spec, get_gpt_mtp_block_spec)
    from megatron.core.post_training.modelopt.layers import Linear
    from megatron.core.transformer.module import Float16Module

    run_on_cpu()
    tc = transformer_config(config, dtype, parallel)
    spec = get_gpt_decoder_block_spec(tc, use_transformer_engine=False,
                                      normalization="RMSNorm")
    if tc.multi_latent_attention:
        for layer in spec.layer_specs:
            attention = layer.submodules.self_attention.submodules
            attention.core_attention = _MlaCoreAttentionStub
            # Transformer Engine's spec holds MLA's down projections whole
            # on every TP rank (TELinear, parallel_mode "duplicated":
            # multi_latent_attention.py); the local spec splits them
            # column-parallel. Megatron-Core's own whole local linear (the
            # ModelOpt spec's, post_training/modelopt/layers.py) holds them
            # as Transformer Engine does.
            attention.linear_q_down_proj = Linear
            attention.linear_kv_down_proj = Linear
    mtp = None
    if tc.mtp_num_layers:
        # the MTP layer is the block's last layer's kind; None on a stage
        # that holds no MTP layer (gpt_layer_specs.py)
        mtp = get_gpt_mtp_block_spec(tc, spec, use_transformer_engine=False)
    model = GPTModel(
        tc, spec, padded_vocab(config["vocab_size"], parallel.get("tp", 1)),
        max_sequence_length=config.get("max_position_embeddings", 4096),
        pre_process=ps.is_pipeline_first_stage(),
        post_process=ps.is_pipeline_last_stage(),
        share_embeddings_and_output_weights=config.get(
            "tie_word_embeddings", False),
        position_embedding_type="rope",
        rotary_base=config.get("rope_theta", 10000),
        mtp_block_spec=mtp)
    if tc.bf16:
        # as Megatron's training loop wraps a bf16 model (training.py
        # get_model): every parameter and buffer converted, the local
        # spec's norms among them (built in float32 whatever params_dtype);
        # the router turns expert_bias back to float32 for its state dict
        Float16Module(tc, model)
    return model


class _MlaCoreAttentionStub(torch.nn.Module):
    """The local spec's core attention under MLA, which megatron-core
    0.16.1 cannot build (multi_latent_attention.py passes k_channels and
    v_channels, which the local DotProductAttention does not take). Core
    attention holds no parameters: the layout is the same; such a model
    cannot run forward."""

    def __init__(self, **kwargs):
        super().__init__()

    def forward(self, *args, **kwargs):
        raise NotImplementedError("MLA under the local spec: layout only")


def _renames(mla):
    """(local spec suffix, Transformer Engine suffix) pairs."""
    if mla:
        return [("self_attention.q_layernorm.weight",
                 "self_attention.linear_q_up_proj.layer_norm_weight"),
                ("self_attention.kv_layernorm.weight",
                 "self_attention.linear_kv_up_proj.layer_norm_weight")]
    return [("input_layernorm.weight",
             "self_attention.linear_qkv.layer_norm_weight")]


def te_names(state_names, mla):
    """local spec name -> the Transformer Engine name wex lays out, for
    every name of a state dict (the dense MLP's norm renamed only where
    the layer has a linear_fc1 of its own, not experts)."""
    out = {}
    dense = {n.rsplit("mlp.linear_fc1.weight", 1)[0] for n in state_names
             if n.endswith(".mlp.linear_fc1.weight")}
    for name in state_names:
        te = name
        for local, fused in _renames(mla):
            if name.endswith("." + local):
                te = name[:-len(local)] + fused
        if name.endswith(".pre_mlp_layernorm.weight") and \
                name[:-len("pre_mlp_layernorm.weight")] in dense:
            te = name[:-len("pre_mlp_layernorm.weight")] + \
                "mlp.linear_fc1.layer_norm_weight"
        out[name] = te
    return out


def held(model, mla):
    """Transformer Engine name -> tensor of what the model holds that a
    checkpoint has: parameters and persistent buffers (its state dict),
    without the `_extra_state` entries (fp8 metadata, empty here)."""
    state = {n: t for n, t in model.state_dict(keep_vars=True).items()
             if not n.endswith("._extra_state")}
    names = te_names(state, mla)
    return {names[n]: t for n, t in state.items()}


class _CpuRngTracker:
    """The model-parallel RNG tracker's interface, forking nothing."""

    @contextlib.contextmanager
    def fork(self, name=None):
        yield

    def is_initialized(self):
        return True


def run_on_cpu():
    from megatron.core.tensor_parallel import random as mrandom
    from megatron.core.transformer import multi_latent_attention
    from megatron.core.transformer.moe import moe_utils

    torch.cuda.current_device = lambda: "cpu"
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    # multi_latent_attention.py of megatron-core 0.16.1 sets HAVE_TE when
    # its Transformer Engine wrappers import, which they do without
    # Transformer Engine (TELinear is then None, and isinstance fails)
    multi_latent_attention.HAVE_TE = False
    # and moe_utils.py of 0.16.1 leaves te_general_gemm undefined without
    # it, which the router's gating linear reads
    moe_utils.te_general_gemm = None
    mrandom._CUDA_RNG_STATE_TRACKER = _CpuRngTracker()
    mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED = True


def causal_mask(seq):
    """Megatron's attention mask: True where a query may not look."""
    return torch.triu(torch.ones(1, 1, seq, seq, dtype=torch.bool), 1)


def init_distributed(rank, world, port):
    """torch.distributed over gloo on the loopback."""
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
