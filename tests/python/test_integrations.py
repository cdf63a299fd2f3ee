"""wex.integrations: the code that runs inside vLLM and SGLang workers.

Neither engine imports here (no GPU, no CUDA torch), so the workers are
stand-ins shaped like vLLM 0.34.0's and SGLang 0.5.23's (engine_fakes):
end to end, an hf trainer process syncs over shm into two TP worker
processes of each engine, which must then hold exactly what
vllm_reference says that engine's loaders put into each TP rank (written
from vLLM's conventions, independently of wex's layouts). In this
process: the rank each worker's coordinates make, against the
coordinates wex's own layouts give every rank; coordinates read from the
engines' modules; and the one-line refusals."""
import json
import pickle

import pytest
import torch

import engine_fakes
import families
import reshard_models
import vllm_reference
import wex
from conftest import run_ranks, write_json
from wex.integrations import _serving
from wex.integrations import sglang as wex_sglang
from wex.integrations.vllm import WexWorkerExtension

TOKEN = "integrations-test"
TP = 2
STEPS = 2
EXTENSION = "wex.integrations.vllm.WexWorkerExtension"
# the model each engine's workers serve end to end
FAMILY = {"vllm": "qwen3", "sglang": "qwen3_moe"}


def job_for(engine, config_path, parallel=None, **extra):
    job = {"model": config_path,
           "source": {"engine": "hf",
                      "options": {"modules": families.MODULES}},
           "destination": {"engine": engine,
                           "parallel": parallel or {"tp": TP}},
           "transport": "shm", "verify": "digest",
           "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
    job.update(extra)
    return job


# ---- end to end ----------------------------------------------------------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_workers_hold_what_the_engine_loads(engine, family_configs,
                                            tmp_path):
    path = family_configs[FAMILY[engine]]
    config = reshard_models.read_config(path)
    outs = {(role, r): str(tmp_path / ("%s%d.pt" % (role, r)))
            for role, r in [("trainer", 0)] + [(engine, r)
                                               for r in range(TP)]}
    with wex.Store(token=TOKEN) as store:
        job_path = write_json(tmp_path / "job.json",
                              [json.dumps(job_for(engine, path)), path,
                               store.address])
        run_ranks("integration_ranks.py",
                  [(role, r, out) for (role, r), out in outs.items()],
                  [job_path, "{out}", "--token", TOKEN,
                   "--job-id", "integrations-%s" % engine,
                   "--steps", str(STEPS)])
    trainer = torch.load(outs[("trainer", 0)])
    for r in range(TP):
        worker = torch.load(outs[(engine, r)])
        assert worker["opened"]["rank"] == r, (engine, r, worker["opened"])
        for step in range(1, STEPS + 1):
            where = "%s TP rank %d, step %d" % (engine, r, step)
            got = worker["steps"][step]
            report = got["report"]
            assert type(report) is dict, where  # plain, for an RPC answer
            assert report["rank"] == r and report["step"] == step, where
            assert report["committed_step"] == step, where
            assert report["verified"] and report["bytes"] > 0, where
            want = vllm_reference.shard(trainer[step]["params"], config, TP,
                                        r)
            assert sorted(got["tensors"]) == sorted(want), where
            for name, tensor in want.items():
                same = torch.equal(got["tensors"][name], tensor)
                assert same, "%s: %s is not what %s's loaders put " \
                    "there" % (where, name, engine)
        if engine == "sglang":
            assert worker["steps"][STEPS]["error"] is None
            assert worker["closed"]
        first, last = (worker["steps"][s]["tensors"] for s in (1, STEPS))
        assert any(not torch.equal(first[n], last[n]) for n in first), \
            "the steps synced the same weights"


# ---- the rank of a worker's coordinates -------------------------------------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_rank_of_coordinates_is_wex_layouts(engine, family_configs):
    path = family_configs["qwen3"]
    parallel = {"tp": 2, "pp": 2, "dp": 2}
    keys = _serving.COORDINATES + (("attn_dp",) if engine == "sglang"
                                   else ())
    dest = _serving.read_destination("t", job_for(engine, path, parallel),
                                     engine, keys)
    layout = wex.layout(path, engine, parallel)
    assert layout["ranks"] == 8
    for rank in layout["layout"]:
        c = rank["coords"]
        given = {"%s_rank" % k: c[k] for k in _serving.COORDINATES}
        at = _serving.place("t", engine, dest, given, _no_engine)
        assert at == (rank["rank"], c["tp"], c["pp"], c["dp"]), (engine, c)


def _no_engine():
    raise AssertionError("every coordinate was given: the engine is not "
                         "asked")


# ---- vLLM -------------------------------------------------------------------

@pytest.fixture
def qwen3(family_configs):
    path = family_configs["qwen3"]
    return path, reshard_models.read_config(path)


def vllm_worker(config, tp_rank, tp=TP, dp=1, dp_index=0, drop=()):
    """A vLLM-shaped worker holding TP rank `tp_rank`'s zeroed tensors
    (less those named in `drop`)."""
    tensors = {n: t for n, t in vllm_reference.zeros(config, tp,
                                                     tp_rank).items()
               if n not in drop}
    worker = engine_fakes.worker_class(EXTENSION)(
        engine_fakes.VllmConfig(engine_fakes.ParallelConfig(
            tp=tp, dp=dp, dp_rank=0, dp_index=dp_index)),
        local_rank=tp_rank, rank=tp_rank)
    worker.model_runner = engine_fakes.ModelRunner(
        engine_fakes.module_of(tensors))
    return worker


def test_extension_mixes_into_a_worker():
    # vLLM refuses an extension sharing a name with its Worker: every
    # name it adds is wex's own, or vLLM's hook for extensions
    names = [a for a in dir(WexWorkerExtension) if not a.startswith("__")]
    assert names and all(a.startswith("wex_") or
                         a == "destroy_worker_extension" for a in names)
    worker_class = engine_fakes.worker_class(EXTENSION)
    assert issubclass(worker_class, WexWorkerExtension)


def test_vllm_coordinates_from_the_engine(qwen3, monkeypatch):
    path, config = qwen3
    # a dense model's DP rank 1: vLLM runs it as its own server
    # (data_parallel_size 1) and keeps its index
    for name, module in engine_fakes.vllm_modules(1, TP).items():
        monkeypatch.setitem(__import__("sys").modules, name, module)
    worker = vllm_worker(config, 1, dp=1, dp_index=1)
    job = job_for("vllm", path, {"tp": TP, "dp": 2})
    opened = engine_fakes.collective_rpc(worker, "wex_open", (job,),
                                         {"token": TOKEN})
    assert opened["rank"] == 3 and (opened["tp"], opened["dp"]) == (1, 1)
    assert opened["tensors"] == len(vllm_reference.local_shapes(config, TP,
                                                                1))
    with pytest.raises(wex.WexError, match="has a wex job open already"):
        worker.wex_open(job, token=TOKEN)
    engine_fakes.collective_rpc(worker, "wex_close")
    # a given coordinate wins over the engine's; the others are read
    opened = worker.wex_open(job, token=TOKEN, dp_rank=0)
    assert opened["rank"] == 1
    worker.destroy_worker_extension()  # vLLM's shutdown hook closes it
    with pytest.raises(wex.WexError, match="no wex job is open"):
        worker.wex_sync(1)


def _one_line(e):
    text = str(e.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("tp,dp,given,expected", [
    (4, 1, {}, "vLLM's tensor-parallel size is 4 (from vLLM) but the "
     "job's /destination/parallel/tp is 2"),
    (2, 3, {}, "vLLM's data-parallel size is 3 (from vLLM) but the job's "
     "/destination/parallel/dp is 2 (<job dict>): expected 2, or 1 for a "
     "server that is one replica"),
    (2, 1, {"tp_rank": 2}, "tp_rank 2 (given) is not a rank of the job's "
     "/destination/parallel/tp = 2 (<job dict>): expected 0..1"),
    (2, 1, {"dp_rank": 2}, "dp_rank 2 (given) is not a rank of the job's "
     "/destination/parallel/dp = 2"),
    (2, 1, {"pp_size": 2}, "vLLM's pipeline-parallel size is 2 (given) "
     "but the job's /destination/parallel/pp is 1"),
    (2, 1, {"tp_rank": -1}, "tp_rank must be a non-negative integer, not "
     "-1"),
])
def test_vllm_coordinates_that_disagree_with_the_job(qwen3, monkeypatch, tp,
                                                     dp, given, expected):
    path, config = qwen3
    for name, module in engine_fakes.vllm_modules(0, tp).items():
        monkeypatch.setitem(__import__("sys").modules, name, module)
    worker = vllm_worker(config, 0, dp=dp)
    with pytest.raises(wex.WexError) as e:
        worker.wex_open(job_for("vllm", path, {"tp": TP, "dp": 2}),
                        token=TOKEN, **given)
    assert e.value.status == "INVALID"
    assert "wex_open: " + expected in _one_line(e)


def test_vllm_without_the_engine(qwen3, monkeypatch):
    path, config = qwen3
    monkeypatch.setitem(__import__("sys").modules, "vllm", None)
    worker = vllm_worker(config, 1)
    with pytest.raises(wex.WexError) as e:
        worker.wex_open(job_for("vllm", path), token=TOKEN, dp_rank=0)
    assert "wex_open: vLLM is not importable here" in _one_line(e)
    assert _one_line(e).endswith(": pass tp_rank explicitly")
    # coordinates of size 1 need not be given
    assert worker.wex_open(job_for("vllm", path), token=TOKEN,
                           tp_rank=1)["rank"] == 1
    worker.wex_close()


def test_vllm_model_lacking_a_tensor(qwen3):
    path, config = qwen3
    worker = vllm_worker(config, 1, drop=("model.norm.weight",))
    with pytest.raises(wex.WexError) as e:
        worker.wex_open(job_for("vllm", path), token=TOKEN, tp_rank=1)
    assert _one_line(e).startswith(
        "INVALID: wex_open: rank 1 (tp 1, pp 0, dp 0): bind: "
        "model.norm.weight: missing (the destination rank 1 holds it: "
        "BF16 [64])")
    # nothing stays open: a fixed model opens
    worker = vllm_worker(config, 1)
    assert worker.wex_open(job_for("vllm", path), token=TOKEN,
                           tp_rank=1)["rank"] == 1
    worker.wex_close()


def test_vllm_model_holding_more_than_the_job(qwen3):
    path, config = qwen3
    worker = vllm_worker(config, 0)
    model = worker.model_runner.model
    model.register_parameter("extra", torch.nn.Parameter(torch.zeros(3)))
    with pytest.raises(wex.WexError) as e:
        worker.wex_open(job_for("vllm", path), token=TOKEN, tp_rank=0)
    assert "extra: the job's destination rank 0 has no such tensor " \
        "(bind(..., strict=False) skips it)" in _one_line(e)
    assert worker.wex_open(job_for("vllm", path), token=TOKEN, tp_rank=0,
                           strict=False)["rank"] == 0
    worker.wex_close()


def test_vllm_job_config_refusals(qwen3, tmp_path):
    path, config = qwen3
    worker = vllm_worker(config, 0)
    cases = [
        (job_for("hf", path), "wex_open: job config <job dict>: "
         "/destination/engine is \"hf\"; expected \"vllm\""),
        (job_for("vllm", path, {"tp": "2"}), "wex_open: job config "
         "<job dict>: /destination/parallel/tp: expected a positive "
         "integer, got \"2\""),
        ("{not json", "wex_open: job config <job text>: not JSON"),
        (str(tmp_path / "none.json"), "wex_open: job config %s: No such "
         "file or directory" % (tmp_path / "none.json")),
    ]
    for job, expected in cases:
        with pytest.raises(wex.WexError) as e:
            worker.wex_open(job, token=TOKEN, tp_rank=0)
        assert expected in _one_line(e), job
    # a job file is read for its sizes, and opened by libwex
    job_path = write_json(tmp_path / "job.json", job_for("vllm", path))
    assert worker.wex_open(job_path, token=TOKEN, tp_rank=0)["rank"] == 0
    worker.wex_close()


def test_vllm_report_is_a_plain_dict():
    report = wex.SyncReport(3, 3, 10, 4096, 1, 0.01, True, 1, 0, 10)

    class Held:
        rank = 5

    out = _serving.report_dict(Held(), report)
    assert type(out) is dict and out["rank"] == 5 and out["step"] == 3
    assert pickle.loads(pickle.dumps(out)) == out
    assert set(out) == set(wex.SyncReport._fields) | {"rank"}


# ---- SGLang -----------------------------------------------------------------

def sglang_model(config, tp_rank, tp=TP):
    return engine_fakes.module_of(vllm_reference.zeros(config, tp, tp_rank))


def install_sglang(monkeypatch, *args, **kwargs):
    for name, module in engine_fakes.sglang_modules(*args, **kwargs).items():
        monkeypatch.setitem(__import__("sys").modules, name, module)


def send(model, command):
    engine_fakes.update_weights_from_tensor(model, command,
                                            wex_sglang.LOAD_FORMAT)


def test_sglang_coordinates_from_the_engine(qwen3, monkeypatch):
    path, config = qwen3
    job = job_for("sglang", path, {"tp": TP, "dp": 2})
    # SGLang's data-parallel controller's replica 1
    install_sglang(monkeypatch, 1, TP, dp_rank=1, dp_size=2)
    model = sglang_model(config, 1)
    send(model, wex_sglang.open_request(job, token=TOKEN))
    assert wex_sglang.wex_state(model) == {
        "rank": 3, "committed_step": 0, "dirty": False, "report": None,
        "error": None}
    with pytest.raises(wex.WexError, match="has a wex job open already"):
        send(model, wex_sglang.open_request(job, token=TOKEN))
    send(model, wex_sglang.close_request())
    assert wex_sglang.wex_state(model) is None
    # a server of its own (no controller, dp_rank never published): the
    # open request says which replica it is
    install_sglang(monkeypatch, 1, TP, published=False)
    send(model, wex_sglang.open_request(job, token=TOKEN, dp_rank=1))
    assert wex_sglang.wex_state(model)["rank"] == 3
    send(model, wex_sglang.close_request())
    send(model, wex_sglang.open_request(job, token=TOKEN))
    assert wex_sglang.wex_state(model)["rank"] == 1
    wex_sglang.wex_close(model)


@pytest.mark.parametrize("sizes,expected", [
    ({"attn_dp_size": 2}, "SGLang's attention data-parallel size is 2 "
     "(from SGLang) but the job's /destination/parallel/attn_dp is 1"),
    ({"dp_size": 4}, "SGLang's data-parallel size is 4 (from SGLang) but "
     "the job's /destination/parallel/dp is 1"),
])
def test_sglang_sizes_that_disagree_with_the_job(qwen3, monkeypatch, sizes,
                                                 expected):
    path, config = qwen3
    install_sglang(monkeypatch, 0, TP, **sizes)
    model = sglang_model(config, 0)
    with pytest.raises(wex.WexError) as e:
        send(model, wex_sglang.open_request(job_for("sglang", path),
                                            token=TOKEN))
    assert "wex_open: " + expected in _one_line(e)
    assert wex_sglang.wex_state(model) is None


def test_sglang_model_lacking_a_tensor(qwen3, monkeypatch):
    path, config = qwen3
    install_sglang(monkeypatch, 0, TP)
    tensors = vllm_reference.zeros(config, TP, 0)
    del tensors["model.layers.1.mlp.down_proj.weight"]
    model = engine_fakes.module_of(tensors)
    with pytest.raises(wex.WexError) as e:
        send(model, wex_sglang.open_request(job_for("sglang", path),
                                            token=TOKEN))
    assert _one_line(e).startswith(
        "INVALID: wex_open: rank 0 (tp 0, pp 0, dp 0): bind: "
        "model.layers.1.mlp.down_proj.weight: missing (the destination "
        "rank 0 holds it: BF16 [64, 48])")
    assert wex_sglang.wex_state(model) is None


def test_sglang_loader_refuses_what_is_not_a_command(qwen3, monkeypatch):
    path, config = qwen3
    install_sglang(monkeypatch, 0, TP)
    model = sglang_model(config, 0)
    weights = [("model.norm.weight", torch.ones(64, dtype=torch.bfloat16))]
    with pytest.raises(wex.WexError) as e:
        send(model, weights)
    assert "load_weights: expected one wex command (wex.open, wex.sync, " \
        "wex.close), got ['model.norm.weight']" in _one_line(e)
    with pytest.raises(wex.WexError) as e:
        send(model, [("wex.sync", torch.tensor([1.5, 2.5]))])
    assert "load_weights: wex.sync: expected the uint8 JSON tensor " \
        "sync_request() makes" in _one_line(e)
    with pytest.raises(wex.WexError, match="wex_sync: no wex job is open "
                       "for this model: send open_request\\(\\) first"):
        send(model, wex_sglang.sync_request(1))


def test_sglang_failed_step_is_kept_not_raised(qwen3, monkeypatch):
    """A step that fails (here: no source ever comes) leaves the server
    serving: the loader keeps the error, and the rank's state says it."""
    path, config = qwen3
    install_sglang(monkeypatch, 0, 1)
    job = job_for("sglang", path, {"tp": 1},
                  timeouts={"connect_seconds": 1, "step_seconds": 1})
    model = sglang_model(config, 0, tp=1)
    with wex.Store(token=TOKEN) as store:
        send(model, wex_sglang.open_request(job, store.address, TOKEN,
                                            job_id="integrations-failed"))
        send(model, wex_sglang.sync_request(1))
        state = wex_sglang.wex_state(model)
        assert state["committed_step"] == 0 and state["report"] is None
        assert state["error"] and "\n" not in state["error"]
        with pytest.raises(wex.WexError):  # called directly, it raises
            wex_sglang.wex_sync(model, 1)
        wex_sglang.wex_close(model)
