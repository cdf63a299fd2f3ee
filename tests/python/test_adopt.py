"""bind's adoption of a destination's host tensors over shm: a trainer
process (adopt_trainer.py) trains and syncs; this process is the engine,
binds its own model and checks, through the module itself, that its
parameters moved into wex's shared memory and hold the trainer's bytes,
that tied weights stay one storage, that its forward gives the trainer's
logits, and that what cannot be adopted is bound where it lives."""
import contextlib
import json
import os
import resource
import subprocess
import sys
import threading

import pytest
import torch

import families
import wex
from conftest import HERE, hf_job, write_json

TOKEN = "adopt-test"
STEPS = 2


@pytest.fixture(scope="module")
def tied_config(tmp_path_factory):
    """A tiny Qwen3 whose lm_head is tied to its embeddings."""
    directory = tmp_path_factory.mktemp("qwen3-tied")
    path = families.write_config("qwen3", str(directory))
    with open(path) as f:
        doc = json.load(f)
    doc["tie_word_embeddings"] = True
    return write_json(path, doc)


@contextlib.contextmanager
def trainer(tmp_path, config_path, name):
    """Runs the trainer process; yields (job, rendezvous address, the
    trainer's saved steps, filled once it has exited)."""
    job = hf_job(config_path, "shm", replicas=1)
    job_path = write_json(tmp_path / ("%s.job.json" % name), job)
    out = tmp_path / ("%s.trainer.pt" % name)
    saved = {}
    with wex.Store(token=TOKEN) as store:
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "adopt_trainer.py"), job_path,
             config_path, store.address, TOKEN, name, str(out), str(STEPS)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            yield job, store.address, saved
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        try:
            output, _ = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
    if proc.returncode != 0:
        pytest.fail("trainer exit %s:\n%s" % (proc.returncode, output[-4000:]))
    saved.update(torch.load(out))


def wex_mappings():
    """(start, end) of this process's mappings of wex's shm memory."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "memfd:wex-shm" in line:
                start, end = line.split()[0].split("-")
                out.append((int(start, 16), int(end, 16)))
    return out


def in_wex_memory(tensor):
    ptr = tensor.data_ptr()
    return any(start <= ptr < end for start, end in wex_mappings())


def logits_of(model):
    g = torch.Generator().manual_seed(7)
    batch = torch.randint(0, families.DENSE["vocab_size"], (2, 8), generator=g)
    model.eval()
    with torch.no_grad():
        return model(input_ids=batch).logits.clone()


def engine_steps(job, model):
    """Syncs every step into the bound `job`; each step's parameters as the
    module holds them (looked up through it) and its logits."""
    steps = {}
    for step in range(1, STEPS + 1):
        report = job.sync(step)
        assert report.committed_step == step and report.verified
        steps[step] = {"params": {k: v.detach().clone() for k, v in
                                  model.state_dict().items()},
                       "logits": logits_of(model)}
    return steps


def assert_same_as_trainer(engine, trainer_steps, where):
    for step in range(1, STEPS + 1):
        want, got = trainer_steps[step], engine[step]
        assert set(got["params"]) == set(want["params"]), where
        for name, tensor in want["params"].items():
            assert torch.equal(got["params"][name], tensor), \
                "%s, step %d: %s differs from the trainer's" % (where, step,
                                                                name)
        assert torch.equal(got["logits"], want["logits"]), \
            "%s, step %d: logits differ from the trainer's" % (where, step)
    # the trainer trained: the engine's weights really changed
    assert not torch.equal(trainer_steps[1]["logits"],
                           trainer_steps[STEPS]["logits"])


def test_adopted_module_holds_the_trainers_weights(tied_config, tmp_path):
    model = families.build(tied_config, 1)
    embed, head = model.model.embed_tokens.weight, model.lm_head.weight
    assert embed is head  # transformers ties by sharing the Parameter
    before = {n: p.data_ptr() for n, p in model.named_parameters()}
    values = {n: p.detach().clone() for n, p in model.named_parameters()}
    with trainer(tmp_path, tied_config, "adopt-tied") as (doc, address,
                                                          saved):
        with wex.Job(doc, "destination", 0, rendezvous=address, token=TOKEN,
                     job_id="adopt-tied") as job:
            job.bind(model)
            names = [t.name for t in job.tensors]
            assert "lm_head.weight" not in names  # tied: bound once
            assert job.adopted == names
            assert job.not_adopted == {}
            # the module's own Parameters, the same objects, now in wex's
            # shared memory, tied weights on one storage
            assert model.lm_head.weight is embed
            for n, p in model.named_parameters():
                assert p.data_ptr() != before[n], n
                assert in_wex_memory(p), "%s is not in wex memory" % n
                # moved with its bytes: the engine serves them until step 1
                assert torch.equal(p, values[n]), n
            engine = engine_steps(job, model)
        # close gave the module memory of its own, holding the last step
        last = {k: v.clone() for k, v in model.state_dict().items()}
        assert not any(in_wex_memory(p) for p in model.parameters())
    assert_same_as_trainer(engine, saved, "adopted")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    for name, tensor in saved[STEPS]["params"].items():
        assert torch.equal(last[name], tensor), name
    assert torch.equal(logits_of(model), saved[STEPS]["logits"])


def test_adopt_false_binds_where_the_tensors_live(family_configs, tmp_path):
    config = family_configs["qwen3"]
    model = families.build(config, 1)
    before = {n: p.data_ptr() for n, p in model.named_parameters()}
    with trainer(tmp_path, config, "adopt-off") as (doc, address, saved):
        with wex.Job(doc, "destination", 0, rendezvous=address, token=TOKEN,
                     job_id="adopt-off") as job:
            job.bind(model, adopt=False)
            assert job.adopted == [] and job.not_adopted == {}
            engine = engine_steps(job, model)
            after = {n: p.data_ptr() for n, p in model.named_parameters()}
    assert after == before
    assert not any(in_wex_memory(p) for p in model.parameters())
    assert_same_as_trainer(engine, saved, "adopt=False")


def test_what_cannot_be_adopted_is_bound_in_place(family_configs, tmp_path):
    """A view of a larger buffer, and a detached copy of a Parameter (the
    Parameter, not handed in, shares its memory), stay where they are,
    with the reason; the rest is adopted, in the same rank."""
    config = family_configs["qwen3"]
    model = families.build(config, 1)
    tensors = dict(model.state_dict(keep_vars=True))
    norm = "model.norm.weight"
    down = "model.layers.0.mlp.down_proj.weight"
    buffer = torch.zeros(2 * tensors[norm].numel(), dtype=torch.bfloat16)
    tensors[norm] = buffer[:tensors[norm].numel()]
    tensors[down] = tensors[down].detach()
    down_ptr = tensors[down].data_ptr()
    with trainer(tmp_path, config, "adopt-mixed") as (doc, address, saved):
        with wex.Job(doc, "destination", 0, rendezvous=address, token=TOKEN,
                     job_id="adopt-mixed") as job:
            job.bind(tensors)
            assert sorted(job.not_adopted) == sorted([norm, down])
            assert "a view of a larger buffer" in job.not_adopted[norm]
            assert "not handed to bind" in job.not_adopted[down]
            assert sorted(job.adopted) == sorted(
                t.name for t in job.tensors if t.name not in (norm, down))
            for step in range(1, STEPS + 1):
                job.sync(step)
            assert model.get_parameter(down).data_ptr() == down_ptr
            assert not in_wex_memory(model.get_parameter(down))
            assert in_wex_memory(model.get_parameter("model.embed_tokens."
                                                     "weight"))
            buffer_now = buffer.clone()
            module_now = {k: v.detach().clone()
                          for k, v in model.state_dict().items()}
    want = saved[STEPS]["params"]
    assert torch.equal(buffer_now[:want[norm].numel()], want[norm])
    assert not buffer_now[want[norm].numel():].any()  # the rest untouched
    for name, tensor in want.items():
        if name != norm:  # the module's own norm was not handed in
            assert torch.equal(module_now[name], tensor), name


def test_adopt_must_be_true_false_or_none(family_configs):
    config = family_configs["qwen3"]
    with wex.Job({"model": config, "source": {"engine": "hf"},
                  "destination": {"engine": "hf"}, "transport": "shm"},
                 "destination", 0, token=TOKEN) as job:
        with pytest.raises(wex.WexError, match="adopt must be True, False "
                           "or None, not 'yes'"):
            job.bind(families.build(config, 1), adopt="yes")


def test_an_adopted_tensor_cannot_be_resized(family_configs):
    """wex memory has the tensor's size for the job's life: resize_ is
    refused by torch itself, where a tensor bound in place would move (and
    sync would refuse it)."""
    config = family_configs["qwen3"]
    model = families.build(config, 1)
    with wex.Job({"model": config, "source": {"engine": "hf"},
                  "destination": {"engine": "hf"}, "transport": "shm"},
                 "destination", 0, token=TOKEN) as job:
        job.bind(model)
        weight = model.model.norm.weight
        assert in_wex_memory(weight)
        with pytest.raises(RuntimeError, match="not resizable"):
            weight.data.resize_(weight.numel() * 64)
        assert in_wex_memory(weight)
        assert weight.numel() == families.DENSE["hidden_size"]


def test_adopt_true_adopts_over_another_transport(family_configs):
    """ucx writes any memory alike, so adoption is off by default there;
    adopt=True still moves the module into memory wex allocates, and the
    sync lands in it (here the source is a thread of this process)."""
    config = family_configs["qwen3"]
    job = hf_job(config, "ucx", replicas=1)
    source_model = families.build(config, 0)
    errors = []

    def source(address):
        try:
            with wex.Job(job, "source", 0, rendezvous=address, token=TOKEN,
                         job_id="adopt-ucx") as src:
                src.bind(source_model, adopt=True)  # no effect on a source
                assert src.adopted == [] and src.not_adopted == {}
                src.sync(1)
        except Exception as e:  # reported by the test below
            errors.append(repr(e))

    model = families.build(config, 1)
    before = {n: p.data_ptr() for n, p in model.named_parameters()}
    with wex.Store(token=TOKEN) as store:
        thread = threading.Thread(target=source, args=(store.address,))
        thread.start()
        try:
            with wex.Job(job, "destination", 0, rendezvous=store.address,
                         token=TOKEN, job_id="adopt-ucx") as dst:
                dst.bind(model, adopt=True)
                assert dst.adopted == [t.name for t in dst.tensors]
                assert all(p.data_ptr() != before[n]
                           for n, p in model.named_parameters())
                dst.sync(1)
                synced = {k: v.detach().clone()
                          for k, v in model.state_dict().items()}
        finally:
            thread.join(120)
    assert errors == []
    want = source_model.state_dict()
    assert set(synced) == set(want)
    for name, tensor in want.items():
        assert torch.equal(synced[name], tensor), name
        assert torch.equal(model.state_dict()[name], tensor), name


def shm_destination(config):
    return wex.Job({"model": config, "source": {"engine": "hf"},
                    "destination": {"engine": "hf"}, "transport": "shm"},
                   "destination", 0, token=TOKEN)


def test_adoption_stays_within_the_open_file_limit(family_configs):
    """shm keeps a descriptor open per allocated tensor: with room for only
    three under RLIMIT_NOFILE, the three largest are adopted and the rest
    bound where they live, saying why."""
    config = family_configs["qwen3"]
    model = families.build(config, 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with shm_destination(config) as job:
        sizes = {t.name: t.nbytes for t in job.tensors}
        used = len(os.listdir("/proc/self/fd"))
        limit = next(n for n in range(used, 4 * used + 400)
                     if n - used - max(64, n // 4) == 3)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        try:
            job.bind(model)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        largest = sorted(sizes, key=lambda n: (-sizes[n], n))[:3]
        assert sorted(job.adopted) == sorted(largest)
        assert set(job.not_adopted) == set(sizes) - set(largest)
        for name, why in job.not_adopted.items():
            assert "over the open-file limit" in why, (name, why)
            assert "RLIMIT_NOFILE %d leaves room for 3" % limit in why
        assert in_wex_memory(model.get_parameter(largest[0]))
        assert not in_wex_memory(model.get_parameter(
            sorted(job.not_adopted)[0]))
    assert not any(in_wex_memory(p) for p in model.parameters())


def test_one_tensor_under_two_names_is_refused(family_configs):
    """Adoption moves a storage once: a tensor handed in under two local
    tensors' names is not adopted, and libwex refuses the overlap."""
    config = family_configs["qwen3"]
    model = families.build(config, 1)
    tensors = dict(model.state_dict(keep_vars=True))
    q = "model.layers.0.self_attn.q_norm.weight"
    k = "model.layers.0.self_attn.k_norm.weight"
    tensors[k] = tensors[q]
    with shm_destination(config) as job:
        with pytest.raises(wex.WexError, match="overlaps local tensor"):
            job.bind(tensors)
        assert q not in job.adopted and k not in job.adopted
        assert job.not_adopted[q] == "its memory is also local tensor %s's" % k
    assert not any(in_wex_memory(p) for p in model.parameters())
