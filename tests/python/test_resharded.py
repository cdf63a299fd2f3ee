"""Resharded, end to end: a Megatron-Core TP2 x PP2 trainer into vLLM
TP2 x DP2 engines, over shm and over ucx.

Four trainer processes each train the same transformers model and bind the
Megatron local tensors a reference slicer (megatron_reference, written from
Megatron-Core's conventions, not from wex) cuts from it; four engine
processes bind vLLM's local tensors (vllm_reference), zeroed. After every
step the test puts each vLLM replica's tensors back together into Hugging
Face tensors with the reference un-slicer, loads them into the same model
class, and checks that every parameter and the logits on a fixed batch are
bitwise the trainer's (replica 0 binds its own tensors, replica 1 lets
wex allocate them). Before any of that, the slicers' names, dtypes and
shapes must be exactly what wex's megatron and vllm engines lay out.

Without processes, the same comparison runs over more parallel configs and
options, and each piece wex lays out is checked against what the reference
holds there (the pieces are only compared with, never used to slice)."""
import json

import pytest
import torch

import families
import megatron_reference
import reshard_models
import vllm_reference
import wex
from conftest import run_ranks, write_json

STEPS = 3
TOKEN = "resharded-test"
TP, PP, DP = reshard_models.TP, reshard_models.PP, reshard_models.DP
MODELS = reshard_models.MODELS


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """model -> (config.json path, config dict, seed-0 state dict)."""
    base = tmp_path_factory.mktemp("resharded")
    out = {}
    for m in MODELS:
        path = reshard_models.write_config(m, str(base / m))
        out[m] = (path, reshard_models.read_config(path),
                  families.checkpoint_state(families.build(path, 0)
                                            .state_dict()))
    return out


def _specs(tensors):
    """name -> (wex dtype name, shape) of a dict of tensors."""
    names = {torch.bfloat16: "BF16", torch.float32: "F32"}
    return {n: (names[t.dtype], tuple(t.shape)) for n, t in tensors.items()}


def _wex_specs(rank):
    return {t["name"]: (t["dtype"], tuple(t["shape"]))
            for t in rank["tensors"]}


def _difference(ours, wexs):
    def only(a, b):
        return sorted("%s %s %s" % (n, *a[n]) for n in a if a[n] != b.get(n))
    return "the reference holds %s; wex lays out %s" % (only(ours, wexs),
                                                        only(wexs, ours))


def _check_pieces(where, ours, rank, hf, padding):
    """What each of wex's pieces says a local tensor holds is what the
    reference put there, the pieces never overlap, and what they leave
    uncovered is vocabulary padding (`padding` in the reference)."""
    for t in rank["tensors"]:
        local = ours[t["name"]]
        covered = torch.zeros(local.shape, dtype=torch.bool)
        for piece in t["pieces"]:
            src = hf[piece["tensor"]]
            for d, (o, e) in enumerate(zip(piece["offset"], piece["extent"])):
                src = src.narrow(d, o, e)
            lead = local.dim() - src.dim()
            dst, mask = local, covered
            for d, a in enumerate(piece["at"]):
                if d < lead:
                    dst, mask = dst[a], mask[a]
                else:
                    e = piece["extent"][d - lead]
                    dst = dst.narrow(d - lead, a, e)
                    mask = mask.narrow(d - lead, a, e)
            same = torch.equal(dst, src)
            assert same, "%s: %s at %s holds %s %s+%s, says wex; the " \
                "reference holds something else there" % (
                    where, t["name"], piece["at"], piece["tensor"],
                    piece["offset"], piece["extent"])
            assert not mask.any(), "%s: %s: pieces overlap at %s" % (
                where, t["name"], piece["at"])
            mask.fill_(True)
        rest = local[~covered]
        assert torch.equal(rest, torch.full_like(rest, padding)), \
            "%s: %s: wex leaves %d elements that are not padding " \
            "unwritten" % (where, t["name"], int((rest != padding).sum()))


def check_megatron(model, path, config, hf, parallel, options=None,
                   pieces=True):
    """Every rank of the reference Megatron slicer holds exactly the tensors
    wex's megatron engine lays out: names, dtypes, shapes, coordinates;
    and, with `pieces`, what wex says is where is there."""
    tp, pp, dp = (parallel.get(k, 1) for k in ("tp", "pp", "dp"))
    layout = wex.layout(path, "megatron", parallel, options)
    assert layout["ranks"] == tp * pp * dp
    for rank in layout["layout"]:
        r = rank["rank"]
        at = megatron_reference.coords(r, tp, pp, dp)
        assert {k: rank["coords"][k] for k in at} == at, \
            "%s: megatron rank %d coordinates" % (model, r)
        shards = megatron_reference.shard(hf, config, tp, pp, r, dp,
                                          **(options or {}))
        ours, wexs = _specs(shards), _wex_specs(rank)
        where = "%s: megatron %s rank %d" % (model, parallel, r)
        assert ours == wexs, "%s: %s" % (where, _difference(ours, wexs))
        if pieces:
            _check_pieces(where, shards, rank, hf,
                          megatron_reference.PAD_VALUE)


def check_vllm(model, path, config, hf, parallel, pieces=True):
    """The same for the reference vLLM slicer and wex's vllm engine; and
    the reference un-slicer undoes the reference loader."""
    tp, dp = parallel.get("tp", 1), parallel.get("dp", 1)
    layout = wex.layout(path, "vllm", parallel)
    assert layout["ranks"] == tp * dp
    for rank in layout["layout"]:
        r = rank["rank"]
        at = vllm_reference.coords(r, tp, dp=dp)
        assert {k: rank["coords"][k] for k in at} == at, \
            "%s: vllm rank %d coordinates" % (model, r)
        shards = vllm_reference.shard(hf, config, tp, at["tp"])
        ours, wexs = _specs(shards), _wex_specs(rank)
        assert ours == _specs(vllm_reference.zeros(config, tp, at["tp"]))
        where = "%s: vllm %s rank %d" % (model, parallel, r)
        assert ours == wexs, "%s: %s" % (where, _difference(ours, wexs))
        if pieces:
            _check_pieces(where, shards, rank, hf, 0.0)
    shards = [vllm_reference.shard(hf, config, tp, r) for r in range(tp)]
    back = vllm_reference.unshard(shards, config, tp)
    assert sorted(back) == sorted(hf)
    for name, tensor in hf.items():
        assert torch.equal(back[name], tensor), name


def check_layouts(model, path, config, hf, pieces=True):
    """Both sides of the end-to-end job."""
    check_megatron(model, path, config, hf, {"tp": TP, "pp": PP},
                   pieces=pieces)
    check_vllm(model, path, config, hf, {"tp": TP, "dp": DP}, pieces=pieces)


# Other parallel configs and options, laid out only: tp over every query
# group, pp = 1 (a tied model has no output_layer), dp between tp and pp,
# Megatron's options, vLLM's KV heads replicated when tp > KV heads.
LAYOUTS = [
    ("megatron", {"tp": 2}, None),
    ("megatron", {"tp": 1, "pp": 2, "dp": 2}, None),
    ("megatron", {"tp": 4}, None),
    ("megatron", {"tp": 2, "pp": 2},
     {"make_vocab_size_divisible_by": 32, "moe_grouped_gemm": True}),
    ("vllm", {"tp": 4}, None),
    ("vllm", {"tp": 1, "dp": 2}, None),
]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("engine,parallel,options", LAYOUTS,
                         ids=["%s-%s%s" % (e, "-".join(
                             "%s%d" % kv for kv in p.items()),
                             "-options" if o else "")
                              for e, p, o in LAYOUTS])
def test_reference_slicers_match_wex_layouts(model, engine, parallel,
                                             options, models):
    path, config, hf = models[model]
    if engine == "vllm":
        check_vllm(model, path, config, hf, parallel)
        return
    try:
        megatron_reference.shard(hf, config, parallel["tp"], 1, 0)
    except ValueError:  # Megatron would refuse it: so must wex
        with pytest.raises(wex.WexError):
            wex.layout(path, "megatron", parallel, options)
        return
    check_megatron(model, path, config, hf, parallel, options)


@pytest.mark.parametrize("model", MODELS)
def test_end_to_end_layouts(model, models):
    check_layouts(model, *models[model])


def _tokens(seed, shape, vocab):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g)


def _job(path, transport):
    job = {"model": path,
           "source": {"engine": "megatron", "parallel": {"tp": TP, "pp": PP}},
           "destination": {"engine": "vllm", "parallel": {"tp": TP, "dp": DP}},
           "transport": transport, "verify": "digest",
           "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
    if transport == "ucx":
        job["topology"] = {"placement": "disaggregated", "gpus_per_host": 1}
    return job


@pytest.mark.parametrize("transport", ["shm", "ucx"])
def test_megatron_into_vllm_bitwise(transport, models, tmp_path):
    for m in MODELS:  # before syncing anything; wex's pieces are left to
        # the tests above, so that this one checks the slicers on its own
        check_layouts(m, *models[m], pieces=False)
    stores = {m: wex.Store(token=TOKEN) for m in MODELS}
    try:
        jobs = {m: [json.dumps(_job(models[m][0], transport)), models[m][0],
                    stores[m].address] for m in MODELS}
        jobs_path = write_json(tmp_path / "jobs.json", jobs)
        outs = {(role, r): tmp_path / ("%s%d.pt" % (role, r))
                for role, n in (("trainer", TP * PP), ("engine", TP * DP))
                for r in range(n)}
        run_ranks("reshard_ranks.py", [(role, r, str(out))
                                       for (role, r), out in outs.items()],
                  [jobs_path, "{out}", "--token", TOKEN,
                   "--job-id", "resharded-%s" % transport,
                   "--steps", str(STEPS)])
    finally:
        for s in stores.values():
            s.close()
    trainers = [torch.load(outs[("trainer", r)]) for r in range(TP * PP)]
    engines = [torch.load(outs[("engine", r)]) for r in range(TP * DP)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the ranks' kernels, the ranks' bits
    try:
        for m in MODELS:
            _check_model(m, models[m], transport, trainers, engines)
    finally:
        torch.set_num_threads(threads)


def _check_model(m, model, transport, trainers, engines):
    path, config, _ = model
    for r, trainer in enumerate(trainers):
        for step in range(1, STEPS + 1):
            assert trainer[m][step]["report"]["step"] == step, \
                "%s over %s: trainer %d step %d" % (m, transport, r, step)
            # UCX over TCP has no RMA: messages; shm has one way
            paths = trainer[m][step]["paths"]
            assert set(paths.values()) - {None} == \
                {"am" if transport == "ucx" else "shm"}, (m, r, paths)
    replica = families.build(path, 1234)  # other weights, until loaded
    replica.eval()
    want = trainers[0][m]
    for step in range(1, STEPS + 1):
        for dp in range(DP):
            where = "%s over %s, step %d, vLLM replica %d" % (m, transport,
                                                               step, dp)
            at = {r: vllm_reference.coords(r, TP, dp=DP)
                  for r in range(TP * DP)}
            ranks = sorted((r for r in at if at[r]["dp"] == dp),
                           key=lambda r: at[r]["tp"])  # by TP rank
            for r in ranks:
                report = engines[r][m][step]["report"]
                assert report["committed_step"] == step, \
                    "%s rank %d" % (where, r)
                assert report["verified"], "%s rank %d" % (where, r)
            shards = [engines[r][m][step]["tensors"] for r in ranks]
            for name, t, region in vllm_reference.padding(shards, config, TP):
                assert not region.any(), \
                    "%s: %s vocabulary padding of TP rank %d was written" % (
                        where, name, t)
            got = vllm_reference.unshard(shards, config, TP)
            assert sorted(got) == sorted(want[step]["params"]), where
            for name, tensor in want[step]["params"].items():
                same = torch.equal(got[name], tensor)
                assert same, "%s: parameter %s differs from the trainer's" % (
                    where, name)
            replica.load_state_dict(families.model_state(got, replica),
                                    strict=True)
            with torch.no_grad():
                logits = replica(input_ids=_tokens(
                    7, (2, 8), config["vocab_size"])).logits
            same = torch.equal(logits, want[step]["logits"])
            assert same, "%s: logits differ from the trainer's" % where
    # the trainer really trained: step 1's logits are not the last step's
    assert not torch.equal(want[1]["logits"], want[STEPS]["logits"]), m
