"""A reference vLLM (un)slicer: what each rank of a vLLM server holds, and
the Hugging Face tensors its ranks add up to, by vLLM's own conventions,
written independently of wex's vllm adapter so the two can check each
other. For the dense llama / qwen2 / qwen3 families and qwen3_moe, with
pp = 1 and ep = 1 (experts split over TP).

What it follows, in vLLM (vllm/model_executor/...):

- ranks: dp outermost, then pp, then tp (a server's TP group is
  consecutive ranks).
- ``layers/vocab_parallel_embedding.py``: VocabParallelEmbedding and
  ParallelLMHead pad the vocabulary to a multiple of
  DEFAULT_VOCAB_PADDING_SIZE (64) (``pad_vocab_size``); TP rank r holds
  rows [r * padded / tp, (r + 1) * padded / tp), the real ones first, and
  ``weight_loader`` zeroes the padding rows. With tied embeddings
  (qwen2/qwen3/llama ``lm_head = self.model.embed_tokens``) there is no
  separate lm_head tensor.
- ``layers/linear.py``: QKVParallelLinear holds, per TP rank,
  [q heads of the rank; its kv heads' k; their v] (num_heads = heads / tp;
  kv heads split over tp, or one replicated head per rank when
  tp >= kv heads: shard id tp_rank // num_kv_head_replicas);
  MergedColumnParallelLinear ``gate_up_proj`` holds [gate shard; up
  shard]; RowParallelLinear ``o_proj`` / ``down_proj`` split on the input
  dimension; norms replicated.
- models ``qwen2.py`` (qkv_proj with bias), ``qwen3.py`` (q_norm/k_norm
  per head), ``llama.py``: ``model.layers.{i}.self_attn.qkv_proj``,
  ``mlp.gate_up_proj``, ``mlp.down_proj``, ``model.norm``, ``lm_head``.
- ``qwen3_moe.py`` + ``layers/fused_moe/layer.py``: the router
  ``mlp.gate`` is a ReplicatedLinear [E, hidden]; FusedMoE holds
  ``mlp.experts.w13_weight`` [E, 2 * I / tp, hidden], expert e's rows
  being [gate shard; up shard] (``_load_w13``: w1 into the first half, w3
  into the second, each narrowed on the output dim by tp rank), and
  ``w2_weight`` [E, hidden, I / tp] (``_load_w2``: narrowed on the input
  dim).
"""
import torch

VOCAB_PADDING = 64


def coords(rank, tp, dp=1, pp=1):
    if not 0 <= rank < tp * pp * dp:
        raise ValueError("rank %d of a tp %d pp %d dp %d server"
                         % (rank, tp, pp, dp))
    return {"tp": rank % tp, "pp": rank // tp % pp, "dp": rank // (tp * pp)}


def padded_vocab(vocab):
    return -(-vocab // VOCAB_PADDING) * VOCAB_PADDING


FAMILIES = ("llama", "qwen2", "qwen3", "qwen3_moe")


def _check(config):
    if config.get("model_type") not in FAMILIES:
        raise NotImplementedError("no vLLM reference for model type %r"
                                  % config.get("model_type"))


def _heads(config):
    nq = config["num_attention_heads"]
    nkv = config.get("num_key_value_heads") or nq
    hd = config.get("head_dim") or config["hidden_size"] // nq
    return nq, nkv, hd


def _kv(config, tp, r):
    """(kv heads per rank, which kv shard rank r holds)."""
    _, nkv, _ = _heads(config)
    if tp >= nkv:
        return 1, r // (tp // nkv)
    return nkv // tp, r


def _qkv_bias(config):
    return (config["model_type"] == "qwen2"
            or bool(config.get("attention_bias")))


def _qk_norm(config):
    return config["model_type"] in ("qwen3", "qwen3_moe")


def is_moe_layer(config, layer):
    if not config.get("num_experts"):
        return False
    if layer in (config.get("mlp_only_layers") or []):
        return False
    return (layer + 1) % config.get("decoder_sparse_step", 1) == 0


def _vocab_rows(config, tp, r):
    """(first real row, real rows, rows held) of TP rank r's shard."""
    per = padded_vocab(config["vocab_size"]) // tp
    start = r * per
    return start, max(0, min(per, config["vocab_size"] - start)), per


def local_shapes(config, tp, r):
    """name -> shape of each tensor TP rank `r` of a server holds."""
    _check(config)
    nq, nkv, hd = _heads(config)
    kv_local, _ = _kv(config, tp, r)
    h = config["hidden_size"]
    rows = _vocab_rows(config, tp, r)[2]
    qkv = (nq // tp + 2 * kv_local) * hd
    out = {"model.embed_tokens.weight": (rows, h)}
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        out[p + "input_layernorm.weight"] = (h,)
        out[p + "self_attn.qkv_proj.weight"] = (qkv, h)
        if _qkv_bias(config):
            out[p + "self_attn.qkv_proj.bias"] = (qkv,)
        if _qk_norm(config):
            out[p + "self_attn.q_norm.weight"] = (hd,)
            out[p + "self_attn.k_norm.weight"] = (hd,)
        out[p + "self_attn.o_proj.weight"] = (h, nq * hd // tp)
        out[p + "post_attention_layernorm.weight"] = (h,)
        if is_moe_layer(config, i):
            e = config["num_experts"]
            im = config["moe_intermediate_size"] // tp
            out[p + "mlp.gate.weight"] = (e, h)
            out[p + "mlp.experts.w13_weight"] = (e, 2 * im, h)
            out[p + "mlp.experts.w2_weight"] = (e, h, im)
        else:
            i_local = config["intermediate_size"] // tp
            out[p + "mlp.gate_up_proj.weight"] = (2 * i_local, h)
            out[p + "mlp.down_proj.weight"] = (h, i_local)
    out["model.norm.weight"] = (h,)
    if not config.get("tie_word_embeddings", False):
        out["lm_head.weight"] = (rows, h)
    return out


def zeros(config, tp, r, dtype=torch.bfloat16):
    """TP rank r's tensors, zeroed, as a destination binds them."""
    return {n: torch.zeros(s, dtype=dtype)
            for n, s in local_shapes(config, tp, r).items()}


def _chunk(t, tp, r, dim=0):
    n = t.shape[dim] // tp
    return t.narrow(dim, r * n, n)


def shard(hf, config, tp, r):
    """What vLLM's weight loaders put into TP rank r from the Hugging Face
    state dict `hf` (vocabulary padding zeroed)."""
    _check(config)
    nq, nkv, hd = _heads(config)
    kv_local, kv_shard = _kv(config, tp, r)
    start, real, per = _vocab_rows(config, tp, r)

    def vocab(w):
        out = torch.zeros((per,) + tuple(w.shape[1:]), dtype=w.dtype)
        out[:real] = w[start:start + real]
        return out

    def qkv(att, kind):  # [this rank's q heads; its kv heads' k; their v]
        q = hf["%sq_proj.%s" % (att, kind)]
        k = hf["%sk_proj.%s" % (att, kind)]
        v = hf["%sv_proj.%s" % (att, kind)]
        n = kv_local * hd
        return torch.cat([_chunk(q, tp, r), k[kv_shard * n:][:n],
                          v[kv_shard * n:][:n]])

    out = {"model.embed_tokens.weight": vocab(hf["model.embed_tokens.weight"])}
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        att = p + "self_attn."
        out[p + "input_layernorm.weight"] = hf[p + "input_layernorm.weight"]
        out[att + "qkv_proj.weight"] = qkv(att, "weight")
        if _qkv_bias(config):
            out[att + "qkv_proj.bias"] = qkv(att, "bias")
        if _qk_norm(config):
            out[att + "q_norm.weight"] = hf[att + "q_norm.weight"]
            out[att + "k_norm.weight"] = hf[att + "k_norm.weight"]
        out[att + "o_proj.weight"] = _chunk(hf[att + "o_proj.weight"],
                                            tp, r, 1)
        out[p + "post_attention_layernorm.weight"] = \
            hf[p + "post_attention_layernorm.weight"]
        mlp = p + "mlp."
        if is_moe_layer(config, i):
            out[mlp + "gate.weight"] = hf[mlp + "gate.weight"]
            experts = range(config["num_experts"])
            e = [mlp + "experts.%d." % j for j in experts]
            out[mlp + "experts.w13_weight"] = torch.stack([torch.cat([
                _chunk(hf[x + "gate_proj.weight"], tp, r),
                _chunk(hf[x + "up_proj.weight"], tp, r)]) for x in e])
            out[mlp + "experts.w2_weight"] = torch.stack([
                _chunk(hf[x + "down_proj.weight"], tp, r, 1) for x in e])
        else:
            out[mlp + "gate_up_proj.weight"] = torch.cat([
                _chunk(hf[mlp + "gate_proj.weight"], tp, r),
                _chunk(hf[mlp + "up_proj.weight"], tp, r)])
            out[mlp + "down_proj.weight"] = _chunk(
                hf[mlp + "down_proj.weight"], tp, r, 1)
    out["model.norm.weight"] = hf["model.norm.weight"]
    if not config.get("tie_word_embeddings", False):
        out["lm_head.weight"] = vocab(hf["lm_head.weight"])
    return {n: t.detach().clone().contiguous() for n, t in out.items()}


def padding(shards, config, tp):
    """(name, tp rank, tensor) of every vocabulary padding region the
    server's ranks hold: vLLM keeps them zero."""
    out = []
    for r, s in enumerate(shards):
        _, real, _ = _vocab_rows(config, tp, r)
        for name in ("model.embed_tokens.weight", "lm_head.weight"):
            if name in s:
                out.append((name, r, s[name][real:]))
    return out


def unshard(shards, config, tp):
    """The Hugging Face state dict one server's TP ranks (`shards`, a list
    by TP rank of name -> tensor) hold: the inverse of what vLLM's weight
    loaders did. Replicated tensors come from TP rank 0, after checking
    every rank holds the same."""
    _check(config)
    if len(shards) != tp:
        raise ValueError("%d shards for tp %d" % (len(shards), tp))
    nq, nkv, hd = _heads(config)

    def same(name):
        for r, s in enumerate(shards[1:], 1):
            if not torch.equal(s[name], shards[0][name]):
                raise AssertionError("%s: TP rank %d differs from TP rank 0 "
                                     "(a replicated tensor)" % (name, r))
        return shards[0][name]

    def cat(name, dim=0):
        return torch.cat([s[name] for s in shards], dim=dim)

    def vocab(name):
        parts = [s[name][:_vocab_rows(config, tp, r)[1]]
                 for r, s in enumerate(shards)]
        return torch.cat(parts)

    def split_qkv(name):
        """Per TP rank [q; k; v] -> the canonical q, k, v."""
        kv_local, _ = _kv(config, tp, 0)
        qn, kvn = nq // tp * hd, kv_local * hd
        q, k, v = [], {}, {}
        for r, s in enumerate(shards):
            t = s[name]
            q.append(t[:qn])
            kid = _kv(config, tp, r)[1]
            for d, part in ((k, t[qn:qn + kvn]), (v, t[qn + kvn:])):
                if kid in d and not torch.equal(d[kid], part):
                    raise AssertionError("%s: the replicas of kv shard %d "
                                         "differ" % (name, kid))
                d[kid] = part
        n_kv_shards = nkv // kv_local
        return (torch.cat(q), torch.cat([k[i] for i in range(n_kv_shards)]),
                torch.cat([v[i] for i in range(n_kv_shards)]))

    def split_gate_up(tensors, dim):
        gate, up = [], []
        for t in tensors:
            n = t.shape[dim] // 2
            gate.append(t.narrow(dim, 0, n))
            up.append(t.narrow(dim, n, n))
        return torch.cat(gate, dim=dim), torch.cat(up, dim=dim)

    hf = {"model.embed_tokens.weight": vocab("model.embed_tokens.weight")}
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        att = p + "self_attn."
        hf[p + "input_layernorm.weight"] = same(p + "input_layernorm.weight")
        (hf[att + "q_proj.weight"], hf[att + "k_proj.weight"],
         hf[att + "v_proj.weight"]) = split_qkv(att + "qkv_proj.weight")
        if _qkv_bias(config):
            (hf[att + "q_proj.bias"], hf[att + "k_proj.bias"],
             hf[att + "v_proj.bias"]) = split_qkv(att + "qkv_proj.bias")
        if _qk_norm(config):
            hf[att + "q_norm.weight"] = same(att + "q_norm.weight")
            hf[att + "k_norm.weight"] = same(att + "k_norm.weight")
        hf[att + "o_proj.weight"] = cat(att + "o_proj.weight", 1)
        norm = p + "post_attention_layernorm.weight"
        hf[norm] = same(norm)
        mlp = p + "mlp."
        if is_moe_layer(config, i):
            hf[mlp + "gate.weight"] = same(mlp + "gate.weight")
            w13 = [s[mlp + "experts.w13_weight"] for s in shards]
            w2 = [s[mlp + "experts.w2_weight"] for s in shards]
            for j in range(config["num_experts"]):
                e = mlp + "experts.%d." % j
                hf[e + "gate_proj.weight"], hf[e + "up_proj.weight"] = \
                    split_gate_up([t[j] for t in w13], 0)
                hf[e + "down_proj.weight"] = torch.cat([t[j] for t in w2],
                                                       dim=1)
        else:
            hf[mlp + "gate_proj.weight"], hf[mlp + "up_proj.weight"] = \
                split_gate_up([s[mlp + "gate_up_proj.weight"]
                               for s in shards], 0)
            hf[mlp + "down_proj.weight"] = cat(mlp + "down_proj.weight", 1)
    hf["model.norm.weight"] = same("model.norm.weight")
    if config.get("tie_word_embeddings", False):
        hf["lm_head.weight"] = hf["model.embed_tokens.weight"]
    else:
        hf["lm_head.weight"] = vocab("lm_head.weight")
    return {n: t.contiguous() for n, t in hf.items()}
