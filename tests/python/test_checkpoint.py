"""Hugging Face safetensors checkpoints as a sync source and a sync sink,
against code nobody here wrote: checkpoints written by the safetensors
library and by transformers' save_pretrained are read by wex, synced into
other engines' layouts held by other processes and saved again; what wex
writes is read back by the safetensors library and by from_pretrained,
and a saved model's logits equal the original's bitwise. Bad checkpoints
are refused in one line each, and a sync that fails leaves nothing."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import families
import wex
from conftest import HERE, ROOT, run_ranks, write_json

TOKEN = "checkpoint-test"
TINY_FP8 = ROOT + "/tests/data/models/DeepSeek-V3-tiny-fp8.config.json"


def wex_command():
    """The wex program: beside the build's libwex, or the one pip put
    beside the package."""
    lib = os.environ.get("WEX_LIBRARY")
    if lib:
        return [os.path.join(os.path.dirname(os.path.dirname(lib)), "bin",
                             "wex")]
    return [sys.executable, "-m", "wex._cli"]


def wex_run(*args, env=None):
    return subprocess.run(wex_command() + list(args), capture_output=True,
                          text=True, timeout=600, env=env)


def job(config, destination, parallel, transport="shm", source_dp=1):
    doc = {"model": config,
           "source": {"engine": "hf", "parallel": {"dp": source_dp}},
           "destination": {"engine": destination, "parallel": parallel},
           "transport": transport,
           "timeouts": {"connect_seconds": 60, "step_seconds": 60}}
    if transport == "ucx":
        doc["topology"] = {"placement": "disaggregated", "gpus_per_host": 1}
    return doc


def read_checkpoint(directory):
    """name -> tensor, through the safetensors library alone."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        return load_file(os.path.join(directory, "model.safetensors"))
    with open(index) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for name in files:
        out.update(load_file(os.path.join(directory, name)))
    return out


def bits(t):
    return t.contiguous().view(torch.uint8)


def catalog(config):
    """The model's canonical tensors (name, torch dtype, shape), from wex."""
    from wex import _dtypes
    rank = wex.layout(config, "hf", {}, rank=0)["layout"][0]
    return [(t["name"], _dtypes.torch_dtype(t["dtype"]), tuple(t["shape"]))
            for t in rank["tensors"]]


def random_tensors(config, seed):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, dtype, shape in catalog(config):
        if dtype == torch.float8_e4m3fn:
            codes = torch.randint(0, 256, shape, generator=g, dtype=torch.int32)
            codes = torch.where((codes & 0x7F) == 0x7F, codes ^ 1, codes)
            out[name] = codes.to(torch.uint8).view(dtype)
        else:
            out[name] = (torch.rand(shape, generator=g) * 0.01).to(dtype)
    return out


def write_sharded(tensors, directory, shards):
    """What the safetensors library writes, cut in `shards` files with an
    index as transformers writes it."""
    os.makedirs(directory)
    names = list(tensors)
    weight_map = {}
    for i in range(shards):
        part = names[i::shards]
        file = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        save_file({n: tensors[n] for n in part},
                  os.path.join(directory, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    write_json(os.path.join(directory, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})


# ---- the safetensors library, both ways ------------------------------------

@pytest.mark.parametrize("shards", [1, 3])
def test_safetensors_library_checkpoints_both_ways(shards, tmp_path):
    """Every dtype the catalog uses (bf16, e4m3 weights, float32 block
    scales and the float32 router bias), single file and sharded: wex
    checks it, syncs it into vLLM TP2 servers holding the FP8 checkpoint
    format (every element checked against the checkpoint), and saves what
    they hold; the safetensors library reads it back equal."""
    tensors = random_tensors(TINY_FP8, shards)
    assert {t.dtype for t in tensors.values()} == {
        torch.bfloat16, torch.float8_e4m3fn, torch.float32}
    src = str(tmp_path / "in")
    if shards == 1:
        os.makedirs(src)
        save_file(tensors, os.path.join(src, "model.safetensors"),
                  metadata={"format": "pt"})
    else:
        write_sharded(tensors, src, shards)
    r = wex_run("check", src, "--model", TINY_FP8)
    assert r.returncode == 0, r.stderr
    assert "the 115 tensors of DeepseekV3ForCausalLM" in r.stdout
    out = str(tmp_path / "out")
    job_path = write_json(tmp_path / "job.json",
                          job(TINY_FP8, "vllm", {"tp": 2, "dp": 2}))
    r = wex_run("run", job_path, "--from-checkpoint", src, "--save", out,
                "--shard-bytes", "1000000", "--steps", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verified"] is True
    back = read_checkpoint(out)
    assert set(back) == set(tensors)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and torch.equal(
            bits(back[name]), bits(t)), name
    with open(os.path.join(out, "model.safetensors.index.json")) as f:
        index = json.load(f)
    assert index["metadata"]["total_size"] == sum(
        t.numel() * t.element_size() for t in tensors.values())
    assert set(index["weight_map"]) == set(tensors)
    assert len(set(index["weight_map"].values())) == 5
    for file in set(index["weight_map"].values()):
        with safe_open(os.path.join(out, file), "pt") as f:
            assert f.metadata() == {"format": "pt"}
            assert set(f.keys()) == {n for n, v in index["weight_map"].items()
                                     if v == file}
    assert not [n for n in os.listdir(tmp_path) if "wex-saving" in n]


# ---- transformers: save_pretrained in, from_pretrained out -----------------

def logits(model):
    model.eval()
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, families.DENSE["vocab_size"], (2, 8), generator=g)
    with torch.no_grad():
        return model(input_ids=ids).logits


def load(directory):
    """from_pretrained in bf16, with the float32 tensors the checkpoint
    keeps (DeepSeek-V3's e_score_correction_bias, which a bf16 load
    rounds) as the checkpoint has them."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, dtype=torch.bfloat16)
    saved = read_checkpoint(directory)
    for name, buf in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            assert saved[name].dtype == torch.float32, name
            buf.data = saved[name].clone()
    return model


@pytest.mark.parametrize("destination,parallel", [
    ("vllm", {"tp": 2}), ("megatron", {"tp": 2, "pp": 2})])
def test_save_pretrained_through_engines_into_from_pretrained(
        destination, parallel, family_configs, tmp_path):
    """For every family: transformers saves a model (sharded); wex reads
    that checkpoint and syncs it into vLLM TP2 / Megatron TP2 x PP2
    destination processes, each checking every element it holds against
    the checkpoint; the destinations save what they hold; from_pretrained
    loads it, and its logits equal the original model's bitwise."""
    for family in families.FAMILIES:
        config = family_configs[family]
        model = families.build(config, 11)
        src, out = str(tmp_path / family), str(tmp_path / (family + "-out"))
        model.save_pretrained(src, max_shard_size="100KB")
        assert os.path.exists(os.path.join(src, "model.safetensors.index.json"))
        r = wex_run("check", src, "--model", config)
        assert r.returncode == 0, "%s: %s" % (family, r.stderr)
        job_path = write_json(tmp_path / ("%s.json" % family),
                              job(config, destination, parallel))
        r = wex_run("run", job_path, "--from-checkpoint", src, "--save", out,
                    "--steps", "1", "--json")
        assert r.returncode == 0, "%s: %s" % (family, r.stderr)
        report = json.loads(r.stdout)
        assert report["verified"] is True, family
        loaded = load(out)
        want = model.state_dict()
        for name, t in loaded.state_dict().items():
            assert torch.equal(t, want[name]), "%s: %s" % (family, name)
        assert torch.equal(logits(loaded), logits(model)), family


# ---- the Python API ---------------------------------------------------------

@pytest.mark.parametrize("transport", ["shm", "ucx"])
def test_a_job_reads_a_checkpoint_and_saves_one(transport, family_configs,
                                                tmp_path):
    """wex.Job(..., checkpoint=DIR) on the source; job.save(OUT) on both
    vLLM TP2 destination ranks together."""
    config = family_configs["qwen3_moe"]
    model = families.build(config, 3)
    src, out = str(tmp_path / "in"), str(tmp_path / "out")
    model.save_pretrained(src)
    job_path = write_json(tmp_path / "job.json",
                          job(config, "vllm", {"tp": 2}, transport))
    with wex.Store(token=TOKEN) as store:
        run_ranks("checkpoint_ranks.py",
                  [("source", 0, ""), ("destination", 0, ""),
                   ("destination", 1, "")],
                  [job_path, store.address, TOKEN, src, out])
    loaded = load(out)
    assert torch.equal(logits(loaded), logits(model))
    assert len([f for f in os.listdir(out) if f.endswith(".safetensors")]) > 1


def test_the_api_refuses_what_it_cannot_do(family_configs, tmp_path):
    config = family_configs["llama"]
    model = families.build(config, 3)
    src = str(tmp_path / "in")
    model.save_pretrained(src)
    megatron = write_json(tmp_path / "m.json",
                          {"model": config, "source": {"engine": "megatron",
                                                       "parallel": {"tp": 2}},
                           "destination": {"engine": "hf"}, "transport": "shm"})
    with pytest.raises(wex.WexError, match="is not a whole checkpoint tensor: "
                       "a checkpoint is bound to engine hf's layout") as e:
        wex.Job(megatron, "source", 0, token=TOKEN, checkpoint=src)
    assert e.value.status == "INVALID"
    plain = write_json(tmp_path / "p.json", job(config, "hf", {"dp": 2}))
    with pytest.raises(wex.WexError, match="a checkpoint is read as a source"):
        wex.Job(plain, "destination", 0, token=TOKEN, checkpoint=src)
    with pytest.raises(wex.WexError, match="neither model.safetensors.index"):
        wex.Job(plain, "source", 0, token=TOKEN, checkpoint=str(tmp_path))
    with wex.Job(plain, "destination", 1, token=TOKEN) as j:
        j.allocate()
        with pytest.raises(wex.WexError, match="ranks save together, through "
                           "the rendezvous: connect"):
            j.save(str(tmp_path / "never"))
    assert not os.path.exists(tmp_path / "never")


# ---- bad checkpoints --------------------------------------------------------

def corrupt(directory, how, tensors):
    """Writes a checkpoint of `tensors` in `directory`, broken as `how`
    says; returns what the one line must name."""
    path = os.path.join(directory, "model.safetensors")
    tensors = dict(tensors)
    name = "model.layers.0.mlp.down_proj.weight"
    if how == "wrong dtype":
        # (another float dtype is read converted: test_checkpoint.c)
        tensors[name] = tensors[name].to(torch.int32)
        save_file(tensors, path)
        return [path, name, "expected BF16 [64, 96], got I32 [64, 96]"]
    if how == "wrong shape":
        tensors[name] = tensors[name][:, :90].contiguous()
        save_file(tensors, path)
        return [path, name, "expected BF16 [64, 96], got BF16 [64, 90]"]
    if how == "missing tensor":
        del tensors[name]
        save_file(tensors, path)
        return [name, "missing; expected BF16 [64, 96]"]
    save_file(tensors, path)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    if how == "truncated shard":
        data = data[:len(data) - 100]
        last = max(header, key=lambda k: header[k]["data_offsets"][1]
                   if k != "__metadata__" else -1)
        expect = [path, "tensor " + last, "is past the data's", "truncated"]
    elif how == "header longer than the file":
        data[:8] = (len(data) + 5).to_bytes(8, "little")
        expect = [path, "header length %d runs past the file's %d bytes"
                  % (len(data) + 5, len(data))]
    elif how == "offsets outside the data":
        header[name]["data_offsets"][1] += 10 ** 9
        header[name]["data_offsets"][0] += 10 ** 9
        text = json.dumps(header).encode()
        data = len(text).to_bytes(8, "little") + text + data[8 + n:]
        expect = [path, "tensor " + name, "data_offsets end"]
    with open(path, "wb") as f:
        f.write(data)
    return expect


BAD = ["truncated shard", "header longer than the file",
       "offsets outside the data", "wrong dtype", "wrong shape",
       "missing tensor", "index naming a missing shard"]


@pytest.mark.parametrize("how", BAD)
def test_a_bad_checkpoint_is_refused_in_one_line(how, family_configs,
                                                 tmp_path):
    config = family_configs["llama"]
    tensors = families.build(config, 4).state_dict()
    src = str(tmp_path / "in")
    if how == "index naming a missing shard":
        write_sharded(tensors, src, 3)
        os.unlink(os.path.join(src, "model-00002-of-00003.safetensors"))
        expect = ["model.safetensors.index.json: /weight_map/",
                  "names shard model-00002-of-00003.safetensors, which is "
                  "not there"]
    else:
        os.makedirs(src)
        expect = corrupt(src, how, tensors)
    before = {f: hashlib.sha256(open(os.path.join(src, f), "rb").read())
              .hexdigest() for f in os.listdir(src)}
    r = wex_run("check", src, "--model", config)
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for part in expect:
        assert part in lines[0], (part, lines[0])
    # wex run refuses it before any rank starts: one line, nothing left
    out = str(tmp_path / "out")
    job_path = write_json(tmp_path / "job.json", job(config, "vllm", {"tp": 2}))
    shm = set(os.listdir("/dev/shm"))
    r = wex_run("run", job_path, "--from-checkpoint", src, "--save", out)
    assert r.returncode == 2, r
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert expect[-1] in r.stderr
    assert not os.path.exists(out)
    assert set(os.listdir("/dev/shm")) == shm
    assert before == {f: hashlib.sha256(open(os.path.join(src, f), "rb")
                                        .read()).hexdigest()
                      for f in os.listdir(src)}


def test_a_failed_sync_saves_nothing(family_configs, tmp_path):
    """A destination killed in the middle of the step: nothing committed,
    the checkpoint read is untouched, and no checkpoint (nor a half one)
    appears where the save was to go."""
    config = family_configs["qwen3"]
    src, out = str(tmp_path / "in"), str(tmp_path / "out")
    families.build(config, 5).save_pretrained(src, max_shard_size="100KB")
    before = {f: os.stat(os.path.join(src, f)).st_mtime_ns
              for f in os.listdir(src)}
    job_path = write_json(tmp_path / "job.json",
                          job(config, "vllm", {"tp": 2, "dp": 2}))
    env = dict(os.environ, WEX_RUN_FAULT="die-mid:destination:1:1")
    r = wex_run("run", job_path, "--from-checkpoint", src, "--save", out,
                "--steps", "1", "--json", env=env)
    assert r.returncode == 1, r
    report = json.loads(r.stdout)
    assert report["verified"] is False
    assert not any(s["committed"] for s in report["steps"]), report["steps"]
    assert not os.path.exists(out)
    assert not [n for n in os.listdir(tmp_path) if "wex-saving" in n]
    assert before == {f: os.stat(os.path.join(src, f)).st_mtime_ns
                      for f in os.listdir(src)}
