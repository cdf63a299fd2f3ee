"""Goldens from real Megatron-Core (megatron-core 0.16.1, on the CPU over
gloo, with its local layer spec; mcore_models.py says what that takes).

Layout: four ranks of a real Megatron-Core job build GPTModels of Qwen3
(tied embeddings, 4 layers over 2 stages, 2 query groups per TP rank) and
Qwen2 (q/k/v biases) at tp 2 x pp 2, Qwen3-MoE and a DeepSeek-V3-style
model (multi-latent attention, a dense layer then routed and shared
experts with a float32 expert bias, one MTP layer) at tp 2 x pp 2 x ep 2
(etp 1), and Qwen3-MoE at tp 2 x dp 2 x ep 2 (etp 2); each rank's
parameters and persistent buffers (under Transformer Engine's names,
mcore_models.te_names) and its parallel_state coordinates must be exactly
what wex's megatron engine lays out for that rank.

Forward, fp32, for Qwen3 (tp 2) and Qwen3-MoE (tp 2 x ep 2, etp 1): a
transformers model bound as the hf source of a real wex job fills a
Megatron-Core GPTModel of other weights bound as its destination; the
Megatron model's logits equal transformers' within 1e-5, and no longer do
once two query heads are swapped in what it holds. Then a GPTModel of
Megatron's own initialisation, bound as the source, syncs into a
transformers model of other weights, whose logits then equal Megatron's.
"""
import json
import socket
import warnings

import pytest
import torch

with warnings.catch_warnings():  # no Transformer Engine, no Apex: expected
    warnings.simplefilter("ignore")
    import megatron.core  # noqa: F401 - a test dependency: install-deps.sh

import families
import reshard_models
import wex
from conftest import run_ranks, write_json

WORLD = 4
TOLERANCE = 1e-5
TOKEN = "mcore-test"
# name, model, parallel config (dp is what the world leaves)
CASES = [
    ("qwen3-tp2-pp2", "qwen3", {"tp": 2, "pp": 2}),
    ("qwen2-tp2-pp2", "qwen2", {"tp": 2, "pp": 2}),
    ("qwen3_moe-tp2-pp2-ep2", "qwen3_moe",
     {"tp": 2, "pp": 2, "ep": 2, "etp": 1}),
    ("qwen3_moe-tp2-dp2-ep2", "qwen3_moe", {"tp": 2, "ep": 2}),
    ("deepseek_v3-tp2-pp2-ep2", "deepseek_v3",
     {"tp": 2, "pp": 2, "ep": 2, "etp": 1}),
]
DTYPES = {"BF16": "bfloat16", "F32": "float32"}
# megatron-core 0.16.1 names the MTP layer's inner layer transformer_layer
OPTIONS = {"mtp_layer_name": "transformer_layer"}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_model(model, directory):
    """reshard_models' Qwen variants (vocabulary 300, padded by Megatron
    to 512 at tp 2); families' DeepSeek-V3 with the same vocabulary and
    one MTP layer."""
    if model in reshard_models.VARIANTS:
        return reshard_models.write_config(model, directory)
    path = families.write_config(model, directory)
    with open(path) as f:
        doc = json.load(f)
    doc.update(vocab_size=reshard_models.VOCAB, num_nextn_predict_layers=1)
    return write_json(path, doc)


def _with_dp(parallel):
    return dict(parallel, dp=WORLD // (parallel["tp"] * parallel.get("pp", 1)))


@pytest.fixture(scope="module")
def megatron_layouts(tmp_path_factory):
    """case -> the Megatron-Core ranks' saves, and each case's config."""
    base = tmp_path_factory.mktemp("mcore-layout")
    paths = {model: _write_model(model, str(base / model))
             for model in {m for _, m, _ in CASES}}
    spec = write_json(base / "cases.json", {
        "world": WORLD, "port": _free_port(),
        "cases": [{"name": n, "config": paths[m], "parallel": p}
                  for n, m, p in CASES]})
    outs = [base / ("rank%d.pt" % r) for r in range(WORLD)]
    run_ranks("mcore_ranks.py", [("layout", r, str(outs[r]))
                                 for r in range(WORLD)],
              [spec, "{out}"], timeout=300)
    ranks = [torch.load(o) for o in outs]
    return {n: (paths[m], [ranks[r][n] for r in range(WORLD)])
            for n, m, _ in CASES}


def _difference(mcore, ours):
    def only(a, b):
        return sorted("%s %s %s" % (n, a[n][0], list(a[n][1]))
                      for n in a if a[n] != b.get(n))
    return "Megatron-Core holds %s; wex lays out %s" % (only(mcore, ours),
                                                        only(ours, mcore))


@pytest.mark.parametrize("name,model,parallel", CASES,
                         ids=[c[0] for c in CASES])
def test_layout_is_megatron_cores(name, model, parallel, megatron_layouts):
    path, ranks = megatron_layouts[name]
    layout = wex.layout(path, "megatron", _with_dp(parallel), OPTIONS)
    assert layout["ranks"] == WORLD
    for r, held in enumerate(ranks):
        ours = layout["layout"][r]
        where = "%s, rank %d" % (name, r)
        coords = {k: ours["coords"][k] for k in held["coords"]}
        assert coords == held["coords"], \
            "%s: wex's coordinates %s, Megatron-Core's %s" % (
                where, coords, held["coords"])
        wexs = {t["name"]: (DTYPES[t["dtype"]], tuple(t["shape"]))
                for t in ours["tensors"]}
        assert wexs == held["tensors"], "%s: %s" % (
            where, _difference(held["tensors"], wexs))


def test_layout_golden_sees_a_wrong_layout(megatron_layouts):
    """The comparison is not blind: the Megatron-Core ranks of one config
    against wex's layout of another differ."""
    path, ranks = megatron_layouts["qwen3_moe-tp2-pp2-ep2"]
    layout = wex.layout(path, "megatron", {"tp": 2, "pp": 2, "ep": 1,
                                           "etp": 2})
    for r, held in enumerate(ranks):
        wexs = {t["name"]: (DTYPES[t["dtype"]], tuple(t["shape"]))
                for t in layout["layout"][r]["tensors"]}
        assert wexs != held["tensors"], r


# model -> the Megatron ranks' parallel config (2 processes)
FORWARD = {"qwen3": {"tp": 2}, "qwen3_moe": {"tp": 2, "ep": 2, "etp": 1}}


def _forward_config(model, directory):
    """reshard_models' model in fp32, untied, 2 layers (Qwen3: 8 query
    heads in 4 groups of head_dim 8, two groups per TP rank); Qwen3-MoE's
    router renormalising its top-k weights (norm_topk_prob, as
    Qwen3-30B-A3B), which Megatron's softmax after top-k does."""
    path = reshard_models.write_config(model, str(directory))
    with open(path) as f:
        doc = json.load(f)
    doc.update(num_hidden_layers=2, tie_word_embeddings=False,
               torch_dtype="float32", dtype="float32")
    if model == "qwen3_moe":
        doc["norm_topk_prob"] = True
    if "layer_types" in doc:
        doc["layer_types"] = doc["layer_types"][:2]
    return write_json(path, doc)


def _forward_job(path, parallel, source, destination):
    sides = {"hf": {"engine": "hf"},
             "megatron": {"engine": "megatron", "parallel": parallel,
                          "options": {"dtype": "fp32"}}}
    return {"model": path, "source": sides[source],
            "destination": sides[destination], "transport": "shm",
            "verify": "digest",
            "timeouts": {"connect_seconds": 60, "step_seconds": 60}}


@pytest.fixture(scope="module")
def forward(tmp_path_factory):
    """model -> (the hf process's saves, the megatron ranks' saves)."""
    base = tmp_path_factory.mktemp("mcore-forward")
    stores = {(m, n): wex.Store(token=TOKEN) for m in FORWARD
              for n in ("into", "from")}
    try:
        models = {}
        for m, parallel in FORWARD.items():
            path = _forward_config(m, base / m)
            models[m] = {
                "config": path, "parallel": parallel,
                "stores": {n: stores[(m, n)].address
                           for n in ("into", "from")},
                "jobs": {"into": _forward_job(path, parallel, "hf",
                                              "megatron"),
                         "from": _forward_job(path, parallel, "megatron",
                                              "hf")}}
        spec = write_json(base / "forward.json", {
            "world": 2, "port": _free_port(), "token": TOKEN,
            "models": models})
        procs = [("hf", 0, str(base / "hf.pt"))] + \
            [("megatron", r, str(base / ("megatron%d.pt" % r)))
             for r in range(2)]
        run_ranks("mcore_ranks.py", procs, [spec, "{out}"], timeout=300)
    finally:
        for s in stores.values():
            s.close()
    hf = torch.load(base / "hf.pt")
    megatron = [torch.load(base / ("megatron%d.pt" % r)) for r in range(2)]
    return {m: (hf[m], [r[m] for r in megatron]) for m in FORWARD}


def _max_difference(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a - b).abs().max())


@pytest.mark.parametrize("model", sorted(FORWARD))
def test_hf_into_megatron_core_logits(model, forward):
    hf, megatron = forward[model]
    assert hf["into"]["step"] == 1
    for r, m in enumerate(megatron):
        assert m["into"]["committed_step"] == 1, r
        assert m["into"]["verified"], r
    reference = hf["reference_logits"]
    assert reference.dtype == torch.float32
    # Megatron's own weights were not transformers' before the step
    assert _max_difference(megatron[0]["before_logits"], reference) > \
        TOLERANCE
    for r, m in enumerate(megatron):
        diff = _max_difference(m["into_logits"], reference)
        assert diff <= TOLERANCE, \
            "%s, megatron rank %d: logits differ from transformers' by %g" \
            % (model, r, diff)


@pytest.mark.parametrize("model", sorted(FORWARD))
def test_swapped_heads_fail_the_comparison(model, forward):
    hf, megatron = forward[model]
    diff = _max_difference(megatron[0]["swapped_logits"],
                           hf["reference_logits"])
    assert diff > TOLERANCE, \
        "%s: two swapped query heads leave the logits within %g (%g)" % (
            model, TOLERANCE, diff)


@pytest.mark.parametrize("model", sorted(FORWARD))
def test_megatron_core_into_hf_logits(model, forward):
    hf, megatron = forward[model]
    assert hf["from"]["committed_step"] == 1
    assert hf["from"]["verified"]
    want = megatron[0]["from_logits"]
    assert _max_difference(megatron[1]["from_logits"], want) == 0.0
    # the destination really changed: other weights before the step
    assert _max_difference(hf["before_logits"], want) > TOLERANCE
    diff = _max_difference(hf["from_logits"], want)
    assert diff <= TOLERANCE, \
        "%s: transformers' logits differ from Megatron-Core's by %g" % (
            model, diff)
