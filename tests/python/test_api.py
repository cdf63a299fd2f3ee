"""The Python API itself: opening jobs, the tensors a rank holds and their
dtypes, every refusal of bind, allocate, sync's report, the context
managers, WexError's status, the store and the documents. A source and a
destination of one job run in two threads of this process (a wex job is
used by one thread at a time; two jobs may run side by side)."""
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

import families
import wex
from conftest import ROOT

TOKEN = "api-test"


@pytest.fixture
def llama(family_configs):
    return family_configs["llama"]


def job_dict(config, **extra):
    job = {"model": config, "source": {"engine": "hf"},
           "destination": {"engine": "hf"}, "transport": "shm"}
    job.update(extra)
    return job


def open_source(config, **kw):
    return wex.Job(job_dict(config), "source", 0, token=TOKEN, **kw)


def model_tensors(job, fill=0):
    """A dict of fresh tensors exactly as the rank holds them."""
    return {s.name: torch.full(s.shape, fill, dtype=s.dtype) for s in job.tensors}


# ---- opening ----------------------------------------------------------------

def test_config_as_dict_text_or_path(llama, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job_dict(llama)))
    for config in (job_dict(llama), json.dumps(job_dict(llama)), str(path), path):
        with wex.Job(config, "source", 0, token=TOKEN) as job:
            assert len(job.tensors) == 21


def test_bad_side_rank_and_config(llama):
    with pytest.raises(wex.WexError, match="side must be 'source' or 'destination'"):
        wex.Job(job_dict(llama), "trainer", 0, token=TOKEN)
    with pytest.raises(wex.WexError, match="rank must be a non-negative integer"):
        wex.Job(job_dict(llama), "source", -1, token=TOKEN)
    with pytest.raises(wex.WexError) as e:
        wex.Job(job_dict(llama), "destination", 1, token=TOKEN)
    assert e.value.status == "INVALID" and "ranks 0..0" in str(e.value)
    with pytest.raises(TypeError, match="config must be a path, JSON text or a dict"):
        wex.Job(42, "source", 0, token=TOKEN)
    with pytest.raises(wex.WexError, match="token"):
        wex.Job(job_dict(llama), "source", 0)


def test_wex_error_names_the_status_and_keeps_the_line(tmp_path):
    with pytest.raises(wex.WexError) as e:
        wex.Job(str(tmp_path / "missing.json"), "source", 0, token=TOKEN)
    assert isinstance(e.value, RuntimeError)
    assert e.value.status == "INVALID" and e.value.code == -1
    assert "missing.json" in e.value.message and "\n" not in e.value.message
    assert str(e.value).startswith("INVALID: ")


def test_a_peer_that_never_comes_is_a_timeout(llama):
    job = job_dict(llama, timeouts={"connect_seconds": 1})
    with wex.Store(token=TOKEN) as store:
        with wex.Job(job, "source", 0, rendezvous=store.address, token=TOKEN) as j:
            j.bind(model_tensors(j))
            with pytest.raises(wex.WexError) as e:
                j.sync(1)
    assert e.value.status == "TIMEOUT", e.value


# ---- tensors and dtypes -------------------------------------------------------

def test_tensors_are_the_checkpoint_names_in_torch_dtypes(llama):
    with open_source(llama) as job:
        specs = job.tensors
        model = families.build(llama, 0)
        sd = model.state_dict()
        assert [s.name for s in specs] == list(sd)
        for s in specs:
            assert isinstance(s, wex.TensorSpec)
            assert s.dtype == sd[s.name].dtype == torch.bfloat16
            assert s.shape == tuple(sd[s.name].shape)
            assert s.nbytes == sd[s.name].numel() * 2


@pytest.mark.parametrize("name,torch_dtype", [
    ("BF16", torch.bfloat16), ("F16", torch.float16), ("F32", torch.float32),
    ("F64", torch.float64), ("F8_E4M3", torch.float8_e4m3fn),
    ("F8_E5M2", torch.float8_e5m2), ("I8", torch.int8), ("U8", torch.uint8),
    ("I32", torch.int32), ("I64", torch.int64)])
def test_dtype_mapping(name, torch_dtype):
    assert wex._dtypes.torch_dtype(name) is torch_dtype
    assert wex._dtypes.name_of(torch_dtype) == name


def test_float32_tensors_of_a_checkpoint(family_configs):
    with open_source(family_configs["deepseek_v3"]) as job:
        f32 = [s.name for s in job.tensors if s.dtype == torch.float32]
    assert f32 == ["model.layers.1.mlp.gate.e_score_correction_bias"]


def test_import_wex_needs_no_torch():
    code = ("import sys; sys.modules['torch'] = None; import wex; "
            "print(wex.__version__, wex.Job.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == "Job"


# ---- bind ---------------------------------------------------------------------

def test_bind_a_model_a_mapping_or_pairs(llama):
    model = families.build(llama, 0)
    for tensors in (model, dict(model.state_dict()),
                    list(model.state_dict().items())):
        with open_source(llama) as job:
            job.bind(tensors)


def test_bind_refuses_a_missing_tensor(llama):
    with open_source(llama) as job:
        t = model_tensors(job)
        del t["model.norm.weight"]
        with pytest.raises(wex.WexError, match=r"bind: model.norm.weight: missing "
                           r"\(the source rank 0 holds it: BF16 \[64\]\)"):
            job.bind(t)


def test_bind_refuses_wrong_dtype_and_shape(llama):
    with open_source(llama) as job:
        t = model_tensors(job)
        t["model.norm.weight"] = torch.zeros(64, dtype=torch.float32)
        with pytest.raises(wex.WexError, match=r"model.norm.weight: expected "
                           r"bfloat16 \[64\], got float32 \[64\]"):
            job.bind(t)
        t = model_tensors(job)
        t["lm_head.weight"] = torch.zeros(64, 256, dtype=torch.bfloat16)
        with pytest.raises(wex.WexError, match=r"lm_head.weight: expected "
                           r"bfloat16 \[256, 64\], got bfloat16 \[64, 256\]"):
            job.bind(t)


def test_bind_refuses_a_strided_tensor(llama):
    with open_source(llama) as job:
        t = model_tensors(job)
        t["lm_head.weight"] = torch.zeros(64, 256, dtype=torch.bfloat16).t()
        with pytest.raises(wex.WexError, match="lm_head.weight: expected a "
                           r"contiguous tensor, got strides \[1, 256\]"):
            job.bind(t)


def test_bind_refuses_unknown_names_unless_not_strict(llama):
    with open_source(llama) as job:
        t = model_tensors(job)
        t["extra.weight"] = torch.zeros(3)
        with pytest.raises(wex.WexError, match="extra.weight: the job's source "
                           "rank 0 has no such tensor"):
            job.bind(t)
        job.bind(t, strict=False)


def test_bind_refuses_what_is_not_a_tensor(llama):
    with open_source(llama) as job:
        t = model_tensors(job)
        t["model.norm.weight"] = [0.0] * 64
        with pytest.raises(wex.WexError, match="model.norm.weight: expected a "
                           "torch.Tensor, got list"):
            job.bind(t)
        with pytest.raises(TypeError, match="expected a Mapping"):
            job.bind(42)


def test_bind_once(llama):
    with open_source(llama) as job:
        job.bind(model_tensors(job))
        with pytest.raises(wex.WexError, match="already bound"):
            job.bind(model_tensors(job))
        with pytest.raises(wex.WexError, match="already bound"):
            job.allocate()


def test_tied_weights_are_bound_once_under_the_jobs_name(tmp_path):
    path = families.write_config("llama", str(tmp_path / "tied"))
    with open(path) as f:
        doc = json.load(f)
    doc["tie_word_embeddings"] = True
    with open(path, "w") as f:
        json.dump(doc, f)
    model = families.build(path, 0)
    sd = model.state_dict(keep_vars=True)
    assert sd["lm_head.weight"].data_ptr() == sd["model.embed_tokens.weight"].data_ptr()
    with open_source(path) as job:
        assert "lm_head.weight" not in [s.name for s in job.tensors]
        job.bind(model)  # strict: lm_head.weight is the embedding's storage


def test_a_closed_job_refuses_use(llama):
    job = open_source(llama)
    job.close()
    job.close()  # idempotent
    assert "closed" in repr(job)
    with pytest.raises(wex.WexError, match="the job is closed"):
        job.sync(1)
    with pytest.raises(wex.WexError, match="the job is closed"):
        job.bind({})


def test_peer_path_before_connect_and_bad_ranks(llama):
    with open_source(llama) as job:
        assert job.peer_path(0) is None  # not connected yet
        with pytest.raises(wex.WexError, match="destination_rank"):
            job.peer_path(-1)


# ---- a sync, in two threads -------------------------------------------------------

def sync_in_threads(job, steps, fill_source, check_destination):
    results, errors = {}, []

    def rank(side):
        try:
            with wex.Job(job, side, 0, rendezvous=store.address, token=TOKEN) as j:
                tensors = j.allocate()
                for step in range(1, steps + 1):
                    if side == "source":
                        fill_source(tensors, step)
                    results[(side, step)] = j.sync(step)
                    if side == "destination":
                        check_destination(tensors, step)
                results[(side, "committed")] = j.committed_step
                results[(side, "paths")] = (j.peer_path(0), j.peer_path(1))
        except Exception as e:  # reported by the test thread
            errors.append(e)

    with wex.Store(token=TOKEN) as store:
        threads = [threading.Thread(target=rank, args=(s,))
                   for s in ("source", "destination")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert not errors, errors
    return results


def test_allocate_and_sync_reports(llama):
    def fill(tensors, step):
        for i, t in enumerate(tensors.values()):
            t.view(torch.uint8).fill_((i + step) % 251)

    seen = []

    def check(tensors, step):
        seen.append(all(bool((t.view(torch.uint8) == (i + step) % 251).all())
                        for i, t in enumerate(tensors.values())))

    r = sync_in_threads(job_dict(llama, verify="digest"), 2, fill, check)
    assert seen == [True, True]
    for side in ("source", "destination"):
        rep = r[(side, 2)]
        assert isinstance(rep, wex.SyncReport)
        assert rep.step == 2 and rep.verified and rep.attempts == 1
        assert rep.failed_over == 0 and rep.peers == 1
        # shm packs nothing: at least a put per operation, from sources only
        assert (rep.puts >= rep.operations) if side == "source" else rep.puts == 0
        assert rep.operations == 21 and rep.bytes == r[("source", 1)].bytes > 0
        assert rep.seconds >= 0
    assert r[("destination", 2)].committed_step == 2
    assert r[("destination", "committed")] == 2
    assert r[("source", "committed")] == 0
    # shm has one way; destination rank 1 does not exist; a destination
    # does not choose how bytes reach it
    assert r[("source", "paths")] == ("shm", None)
    assert r[("destination", "paths")] == (None, None)


# ---- the store and the documents ---------------------------------------------------

def test_store():
    with wex.Store(token=TOKEN) as store:
        host, port = store.address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert store.address in repr(store)
    assert "closed" in repr(store)
    with pytest.raises(wex.WexError, match="a token is required"):
        wex.Store()


def test_layout_document(llama):
    doc = wex.layout(llama, "vllm", {"tp": 2})
    assert doc["engine"] == "vllm" and doc["ranks"] == 2
    names = [t["name"] for t in doc["layout"][1]["tensors"]]
    assert "model.layers.0.self_attn.qkv_proj.weight" in names
    one = wex.layout(llama, "megatron", {"tp": 2, "pp": 2}, rank=3)
    assert [r["rank"] for r in one["layout"]] == [3]
    with pytest.raises(wex.WexError, match="ranks 0..1"):
        wex.layout(llama, "vllm", {"tp": 2}, rank=2)
    with pytest.raises(wex.WexError, match="no such|available"):
        wex.layout(llama, "no-such-engine", {})


def test_plan_document():
    job = os.path.join(ROOT, "samples", "jobs",
                       "qwen3-0.6b-megatron-to-vllm-colocated.json")
    whole = wex.plan(job)
    assert whole["redundant_bytes"] == 0
    assert whole["bytes"] == whole["bytes_needed"] > 0
    assert whole["predicted_seconds"] >= whole["lower_bound_seconds"] > 0
    one = wex.plan(job, rank=1, side="source")
    assert one["side"] == "source" and one["rank"] == 1 and one["bytes"] > 0
    with pytest.raises(wex.WexError, match="side must be"):
        wex.plan(job, side="both")
