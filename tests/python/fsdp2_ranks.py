"""The ranks of a real torch FSDP2 job (fully_shard over gloo, on CPU)
syncing into a Hugging Face model; run by test_fsdp2.py:

  fsdp2_ranks.py trainer RANK CONFIG WORLD PORT STORE
  fsdp2_ranks.py engine 0 CONFIG WORLD PORT STORE

A trainer builds the tiny model of CONFIG (config.json) in bf16, wraps
every decoder layer and then the model with fully_shard, as FSDP2's
recipes do, and checks that every parameter's to_local() (and every
persistent buffer, which FSDP2 leaves whole) has the name, shape and dtype
of the rank's local tensor in `wex layout` (engine fsdp, dp = WORLD), and
that each piece wex names holds those rows of the unsharded tensor. Then
the trainers bind their to_local() tensors to a wex source job and sync
step 1 into the engine, a whole model of another seed in the checkpoint's
dtypes bound with job.bind(model), which must then equal the trainers'
model bit for bit.
"""
import os
import sys

import torch
import transformers

import families
import wex

TOKEN = "fsdp2-test"


def build(config, seed):
    torch.manual_seed(seed)
    hf = transformers.AutoConfig.from_pretrained(os.path.dirname(config))
    return transformers.AutoModelForCausalLM.from_config(
        hf, dtype=torch.bfloat16)


def check_layout(config, world, rank, local, full):
    ours = wex.layout(config, "fsdp", {"dp": world},
                      {"modules": families.MODULES}, rank=rank)["layout"][0]
    held = {t["name"]: t for t in ours["tensors"]}
    assert sorted(held) == sorted(local), (
        "rank %d: wex's names differ from the model's: only wex %s, only "
        "torch %s" % (rank, sorted(set(held) - set(local)),
                      sorted(set(local) - set(held))))
    for name, tensor in local.items():
        t = held[name]
        assert list(tensor.shape) == t["shape"], (
            "rank %d: %s: to_local() is %s, wex says %s"
            % (rank, name, list(tensor.shape), t["shape"]))
        assert t["dtype"] == {torch.bfloat16: "BF16",
                              torch.float32: "F32"}[tensor.dtype], (
            "rank %d: %s: %s, wex says %s" % (rank, name, tensor.dtype,
                                              t["dtype"]))
        if any(len(p["at"]) > len(p["offset"]) for p in t["pieces"]):
            # transformers 5's stacked experts: FSDP2 chunks them by expert
            chunk = -(-full[name].shape[0] // world)
            lo = rank * chunk
            assert torch.equal(tensor, full[name][lo:lo + tensor.shape[0]])
            assert sorted({p["at"][0] for p in t["pieces"]}) == \
                list(range(tensor.shape[0])), name
            continue
        for p in t["pieces"]:
            # its own name (transformers 5: Mixtral's router under mlp)
            assert p["tensor"] == name.replace(
                ".mlp.gate.", ".block_sparse_moe.gate."
                if "block_sparse_moe" in p["tensor"] else ".mlp.gate.")
            assert p["at"][0] == 0
            lo, n = p["offset"][0], p["extent"][0]
            assert torch.equal(tensor[:n], full[name][lo:lo + n]), (
                "rank %d: %s: rows %d..%d are not there"
                % (rank, name, lo, lo + n))
        assert sum(p["extent"][0] for p in t["pieces"]) == tensor.shape[0]


def trainer(rank, config, world, port, job, store):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = build(config, 0)  # every rank builds the same model
    full = {n: t.detach().clone() for n, t in model.state_dict().items()}
    mesh = init_device_mesh("cpu", (world,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    # parameters are sharded DTensors; persistent buffers (DeepSeek-V3's
    # e_score_correction_bias) stay whole on every rank
    local = {n: p.to_local() for n, p in model.named_parameters()}
    local.update((n, b) for n, b in model.named_buffers() if n in full)
    check_layout(config, world, rank, local, full)
    with wex.Job(job, "source", rank, rendezvous=store, token=TOKEN,
                 job_id="fsdp2-" + port) as j:
        j.bind(local)
        j.sync(1)
    dist.destroy_process_group()
    print("trainer %d: %d tensors agree with wex" % (rank, len(local)))


def engine(config, world, port, job, store):
    model = families.build(config, 1)  # the checkpoint's dtypes
    with wex.Job(job, "destination", 0, rendezvous=store, token=TOKEN,
                 job_id="fsdp2-" + port) as j:
        j.bind(model)
        report = j.sync(1)
    assert report.committed_step == 1, report
    want = build(config, 0).state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, want[name].to(tensor.dtype)), \
            "engine: %s differs" % name
    print("engine: every tensor synced from %d FSDP2 ranks" % world)


def main():
    role, rank, config, world, port, store = sys.argv[1:7]
    world = int(world)
    job = {"model": config,
           "source": {"engine": "fsdp", "parallel": {"dp": world},
                      "options": {"modules": families.MODULES}},
           "destination": {"engine": "hf",
                           "options": {"modules": families.MODULES}},
           "transport": "shm",
           "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
    if role == "trainer":
        trainer(int(rank), config, world, port, job, store)
    else:
        engine(config, world, port, job, store)


if __name__ == "__main__":
    main()
