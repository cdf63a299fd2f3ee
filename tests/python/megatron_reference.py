"""A reference Megatron-Core slicer: what each rank of a Megatron-Core
(Transformer Engine layer spec) job holds, computed from a Hugging Face
state dict by Megatron's own conventions, written independently of wex's
megatron adapter so the two can check each other.

``shard(hf, config, tp, pp, rank)`` returns rank's local tensors
(name -> tensor, under Megatron's state-dict names) for the dense llama /
qwen2 / qwen3 families and qwen3_moe. What it follows, in Megatron-LM:

- ranks: ``megatron/core/parallel_state.py`` RankGenerator, order
  "tp-cp-ep-dp-pp": tp varies fastest, then dp, then pp.
- vocabulary: ``megatron/training/tokenizer`` ``_vocab_size_with_padding``
  pads to a multiple of make_vocab_size_divisible_by * tp (128 by default);
  ``tensor_parallel/layers.py`` VocabParallelEmbedding and the
  ColumnParallelLinear ``output_layer`` hold rows
  [r * padded / tp, (r + 1) * padded / tp) of the padded vocabulary.
- pipeline: ``transformer_block.py`` builds num_layers / pp layers per
  stage, numbered from 0 within the stage (``decoder.layers.{local}``);
  the embedding is on the first stage, ``decoder.final_layernorm`` and
  ``output_layer`` on the last. With tied embeddings and pp > 1 the last
  stage still allocates ``output_layer.weight`` (``gpt_model.py``:
  ``skip_weight_param_allocation=self.pre_process and
  self.share_embeddings_and_output_weights``) and
  ``language_module.py`` ``setup_embeddings_and_output_layer`` makes it a
  copy of the word embeddings.
- attention: ``transformer/attention.py`` SelfAttention builds
  ``linear_qkv`` with hidden -> (np + 2 * ng) * hn outputs, column-parallel,
  and ``get_query_key_value_tensors`` views each rank's output as
  [ng / tp, (np / ng + 2) * hn] and splits each group into
  [np / ng * hn (q of the group), hn (k), hn (v)]: the fused weight (and
  bias) is interleaved per query group, and each TP rank holds ng / tp
  whole groups. The input layer norm is fused into it (TE's
  LayerNormColumnParallelLinear: ``linear_qkv.layer_norm_weight``);
  ``q_layernorm`` / ``k_layernorm`` are per head ([hn]), replicated;
  ``linear_proj`` is row-parallel (split on its input columns).
- MLP: ``transformer/mlp.py`` builds ``linear_fc1`` with 2 * ffn outputs
  when gated (swiglu), column-parallel, and ``glu`` chunks each rank's
  output in two: [gate shard; up shard] per TP rank; the pre-MLP norm is
  fused (``linear_fc1.layer_norm_weight``); ``linear_fc2`` is row-parallel.
- MoE (``transformer/moe/``): the norm is a separate
  ``pre_mlp_layernorm``, the router ``mlp.router.weight`` [E, hidden] is
  replicated, SequentialMLP (``transformer_config.py``: moe_grouped_gemm
  defaults to False) holds local expert j as
  ``mlp.experts.local_experts.{j}.linear_fc1.weight`` / ``linear_fc2``
  (TEGroupedMLP's ``mlp.experts.linear_fc1.weight{j}`` /
  ``linear_fc2.weight{j}`` with moe_grouped_gemm on); with ep = 1 every
  rank holds every expert, split over the expert-TP group
  (expert_tensor_parallel_size defaults to tp) like the dense MLP.

Vocabulary padding rows hold PAD_VALUE (Megatron leaves them as
initialised; a receiver must never see them).
"""
import torch

PAD_VALUE = 7.0  # a value no trained weight of these tiny models holds


def coords(rank, tp, pp, dp=1):
    """Megatron's coordinates of `rank`: tp fastest, then dp, then pp."""
    if not 0 <= rank < tp * pp * dp:
        raise ValueError("rank %d of a tp %d pp %d dp %d job"
                         % (rank, tp, pp, dp))
    return {"tp": rank % tp, "dp": rank // tp % dp, "pp": rank // (tp * dp)}


def padded_vocab(vocab, tp, make_vocab_size_divisible_by=128):
    multiple = make_vocab_size_divisible_by * tp
    return -(-vocab // multiple) * multiple


def stage_layers(num_layers, pp, stage):
    """The global layer numbers of pipeline `stage` (even split)."""
    if num_layers % pp:
        raise ValueError("%d layers do not split evenly over pp %d"
                         % (num_layers, pp))
    per = num_layers // pp
    return range(stage * per, (stage + 1) * per)


def _heads(config):
    nq = config["num_attention_heads"]
    ng = config.get("num_key_value_heads") or nq
    hn = config.get("head_dim") or config["hidden_size"] // nq
    return nq, ng, hn


def is_moe_layer(config, layer):
    """As the Hugging Face / vLLM qwen3_moe models decide it."""
    if not config.get("num_experts"):
        return False
    if layer in (config.get("mlp_only_layers") or []):
        return False
    return (layer + 1) % config.get("decoder_sparse_step", 1) == 0


def _tp_chunk(tensor, tp, r, dim=0):
    size = tensor.shape[dim]
    if size % tp:
        raise ValueError("dimension %d of size %d does not split over tp %d"
                         % (dim, size, tp))
    return tensor.narrow(dim, r * (size // tp), size // tp)


def _vocab_shard(weight, tp, r, divisible_by):
    vocab, hidden = weight.shape
    padded = torch.full((padded_vocab(vocab, tp, divisible_by), hidden),
                        PAD_VALUE, dtype=weight.dtype)
    padded[:vocab] = weight
    return _tp_chunk(padded, tp, r)


def _fused_qkv(q, k, v, nq, ng, hn):
    """Megatron's linear_qkv (weight [rows, hidden] or bias [rows]) from
    Hugging Face's q/k/v: for each query group, its np/ng query heads,
    then its key head, then its value head."""
    rest = q.shape[1:]
    q = q.reshape(ng, nq // ng * hn, *rest)
    k = k.reshape(ng, hn, *rest)
    v = v.reshape(ng, hn, *rest)
    return torch.cat([q, k, v], dim=1).reshape(ng * (nq // ng + 2) * hn, *rest)


FAMILIES = ("llama", "qwen2", "qwen3", "qwen3_moe")


def shard(hf, config, tp, pp, rank, dp=1, make_vocab_size_divisible_by=128,
          moe_grouped_gemm=False):
    """Rank `rank`'s local tensors, name -> contiguous tensor, from the
    Hugging Face state dict `hf` of the model of `config` (config.json as
    a dict)."""
    if config.get("model_type") not in FAMILIES:
        raise NotImplementedError("no Megatron reference for model type %r"
                                  % config.get("model_type"))
    c = coords(rank, tp, pp, dp)
    r, stage = c["tp"], c["pp"]
    nq, ng, hn = _heads(config)
    if ng % tp:
        raise ValueError("Megatron needs num_query_groups %d divisible by "
                         "tp %d" % (ng, tp))

    def vocab(name):
        return _vocab_shard(hf[name], tp, r, make_vocab_size_divisible_by)

    def column(name):  # column-parallel: split on the output rows
        return _tp_chunk(hf[name], tp, r)

    def row(name):  # row-parallel: split on the input columns
        return _tp_chunk(hf[name], tp, r, dim=1)

    def gate_up(prefix):  # linear_fc1 of TP rank r: [gate shard; up shard]
        return torch.cat([column(prefix + "gate_proj.weight"),
                          column(prefix + "up_proj.weight")])

    def qkv(prefix, kind):
        return _tp_chunk(_fused_qkv(hf[prefix + "q_proj." + kind],
                                    hf[prefix + "k_proj." + kind],
                                    hf[prefix + "v_proj." + kind],
                                    nq, ng, hn), tp, r)

    out = {}
    if stage == 0:
        out["embedding.word_embeddings.weight"] = \
            vocab("model.embed_tokens.weight")
    layers = stage_layers(config["num_hidden_layers"], pp, stage)
    for local, g in enumerate(layers):
        hp = "model.layers.%d." % g
        att, mlp = hp + "self_attn.", hp + "mlp."
        ma = "decoder.layers.%d.self_attention." % local
        mm = "decoder.layers.%d.mlp." % local
        out[ma + "linear_qkv.layer_norm_weight"] = \
            hf[hp + "input_layernorm.weight"]
        out[ma + "linear_qkv.weight"] = qkv(att, "weight")
        if att + "q_proj.bias" in hf:
            out[ma + "linear_qkv.bias"] = qkv(att, "bias")
        if att + "q_norm.weight" in hf:
            out[ma + "q_layernorm.weight"] = hf[att + "q_norm.weight"]
            out[ma + "k_layernorm.weight"] = hf[att + "k_norm.weight"]
        out[ma + "linear_proj.weight"] = row(att + "o_proj.weight")
        norm = hf[hp + "post_attention_layernorm.weight"]
        if is_moe_layer(config, g):
            out["decoder.layers.%d.pre_mlp_layernorm.weight" % local] = norm
            out[mm + "router.weight"] = hf[mlp + "gate.weight"]
            for j in range(config["num_experts"]):  # ep 1: all, over etp = tp
                e = mlp + "experts.%d." % j
                if moe_grouped_gemm:  # TEGroupedMLP
                    fc1 = mm + "experts.linear_fc1.weight%d" % j
                    fc2 = mm + "experts.linear_fc2.weight%d" % j
                else:  # SequentialMLP
                    fc1 = mm + "experts.local_experts.%d.linear_fc1.weight" % j
                    fc2 = mm + "experts.local_experts.%d.linear_fc2.weight" % j
                out[fc1] = gate_up(e)
                out[fc2] = row(e + "down_proj.weight")
        else:
            out[mm + "linear_fc1.layer_norm_weight"] = norm
            out[mm + "linear_fc1.weight"] = gate_up(mlp)
            out[mm + "linear_fc2.weight"] = row(mlp + "down_proj.weight")
    if stage == pp - 1:
        out["decoder.final_layernorm.weight"] = hf["model.norm.weight"]
        if not config.get("tie_word_embeddings", False):
            out["output_layer.weight"] = vocab("lm_head.weight")
        elif pp > 1:  # the last stage's own copy of the word embeddings
            out["output_layer.weight"] = vocab("model.embed_tokens.weight")
    return {name: t.detach().clone().contiguous() for name, t in out.items()}
