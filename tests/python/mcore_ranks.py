"""One process of test_megatron_core (command lines below): a rank of a
real Megatron-Core job, over torch.distributed gloo on the loopback.

  mcore_ranks.py layout RANK CASES.json OUT.pt
      For every case (a model's config.json path, a parallel config whose
      dp is the world's size over tp x pp): initialise Megatron's parallel
      state, build this rank's GPTModel (mcore_models.build, bf16) and save
      what it holds (under wex's Transformer Engine names: dtypes, shapes)
      and its coordinates as parallel_state reports them.

  mcore_ranks.py megatron RANK FORWARD.json OUT.pt
  mcore_ranks.py hf 0 FORWARD.json OUT.pt
      The forward goldens, fp32, for every model two jobs in turn. Job
      "into": the hf rank binds a transformers model as the source, the
      megatron ranks bind their GPTModel (Megatron's own initialisation) as
      the destination; after the step the megatron ranks run the model
      forward, and again with two query heads of layer 0's linear_qkv
      swapped (the negative control). Job "from": a GPTModel of other
      weights is the source, a transformers model of others again the
      destination; both sides run forward after the step. Every forward's
      logits (gathered over tp, padding cut) are saved with the sync
      reports.
"""
import argparse
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcore_models  # noqa: E402

warnings.filterwarnings("ignore", message=".*Transformer Engine.*")


def megatron_coords():
    from megatron.core import parallel_state as ps
    return {"tp": ps.get_tensor_model_parallel_rank(),
            "pp": ps.get_pipeline_model_parallel_rank(),
            "dp": ps.get_data_parallel_rank(),
            "ep": ps.get_expert_model_parallel_rank(),
            "etp": ps.get_expert_tensor_parallel_rank()}


def init_parallel(parallel):
    from megatron.core import parallel_state as ps
    tp = parallel.get("tp", 1)
    ps.initialize_model_parallel(
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=parallel.get("pp", 1),
        expert_model_parallel_size=parallel.get("ep", 1),
        expert_tensor_parallel_size=parallel.get("etp", tp))


def layout(args, cases):
    from megatron.core import parallel_state as ps
    out = {}
    for case in cases:
        init_parallel(case["parallel"])
        config = mcore_models.read_config(case["config"])
        model = mcore_models.build(config, torch.bfloat16, case["parallel"])
        held = mcore_models.held(model, config["model_type"] == "deepseek_v3")
        out[case["name"]] = {
            "coords": megatron_coords(),
            "tensors": {n: (str(t.dtype).replace("torch.", ""),
                            tuple(t.shape)) for n, t in held.items()}}
        ps.destroy_model_parallel()
    return out


def tokens(config):
    g = torch.Generator().manual_seed(7)
    return torch.randint(0, config["vocab_size"], (2, 10), generator=g)


def perturb_norms(named, seed):
    """Norm weights away from Megatron's and transformers' ones, so that a
    norm synced into the wrong place changes the logits: replicated tensors,
    the same values on every rank (seeded by name)."""
    with torch.no_grad():
        for name, t in named:
            if "norm" in name:
                g = torch.Generator().manual_seed(seed + sum(map(ord, name)))
                t.add_(0.2 * torch.randn(t.shape, generator=g, dtype=t.dtype))


def megatron_logits(model, config):
    """The full logits: each tp rank's vocabulary shard gathered, the
    padding rows cut."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    ids = tokens(config)
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    with torch.no_grad():
        shard = model(ids, positions,
                      mcore_models.causal_mask(ids.shape[1])).contiguous()
    group = ps.get_tensor_model_parallel_group()
    parts = [torch.empty_like(shard)
             for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, shard, group=group)
    return torch.cat(parts, dim=-1)[..., :config["vocab_size"]]


def swap_heads(model, config):
    """Swaps query heads 0 and 1 (both of query group 0) in layer 0's
    linear_qkv on tp rank 0: a layout that put heads in the wrong order."""
    from megatron.core import parallel_state as ps
    if ps.get_tensor_model_parallel_rank() != 0:
        return
    d = config["head_dim"]
    w = model.decoder.layers[0].self_attention.linear_qkv.weight
    with torch.no_grad():
        first = w[:d].clone()
        w[:d] = w[d:2 * d]
        w[d:2 * d] = first


def hf_model(config_path, seed):
    import transformers
    config = transformers.AutoConfig.from_pretrained(
        os.path.dirname(config_path))
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.float32).eval()
    perturb_norms(model.named_parameters(), seed)
    return model


def hf_logits(model, config):
    with torch.no_grad():
        return model(input_ids=tokens(config)).logits


def open_job(spec, model, side, rank, name):
    import wex
    one = spec["models"][model]
    return wex.Job(one["jobs"][name], side, rank,
                   rendezvous=one["stores"][name], token=spec["token"],
                   job_id="mcore-%s-%s" % (model, name))


def megatron_model(args, spec, model):
    from megatron.core import parallel_state as ps
    one = spec["models"][model]
    parallel = one["parallel"]
    init_parallel(parallel)
    config = mcore_models.read_config(one["config"])
    out = {}
    torch.manual_seed(11)  # the same seed on every rank: consistent shards
    megatron = mcore_models.build(config, torch.float32, parallel).eval()
    out["before_logits"] = megatron_logits(megatron, config)
    with open_job(spec, model, "destination", args.rank, "into") as job:
        job.bind(mcore_models.held(megatron, False))
        out["into"] = job.sync(1)._asdict()
    out["into_logits"] = megatron_logits(megatron, config)
    swap_heads(megatron, config)
    out["swapped_logits"] = megatron_logits(megatron, config)

    torch.manual_seed(12)
    megatron = mcore_models.build(config, torch.float32, parallel).eval()
    perturb_norms(megatron.named_parameters(), 12)
    with open_job(spec, model, "source", args.rank, "from") as job:
        job.bind(mcore_models.held(megatron, False))
        out["from"] = job.sync(1)._asdict()
    out["from_logits"] = megatron_logits(megatron, config)
    ps.destroy_model_parallel()
    return out


def hf_model_run(spec, model):
    path = spec["models"][model]["config"]
    config = mcore_models.read_config(path)
    out = {}
    hf = hf_model(path, 0)
    with open_job(spec, model, "source", 0, "into") as job:
        job.bind(hf)
        out["into"] = job.sync(1)._asdict()
    out["reference_logits"] = hf_logits(hf, config)
    hf = hf_model(path, 1234)
    out["before_logits"] = hf_logits(hf, config)
    with open_job(spec, model, "destination", 0, "from") as job:
        job.bind(hf)
        out["from"] = job.sync(1)._asdict()
    out["from_logits"] = hf_logits(hf, config)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["layout", "megatron", "hf"])
    parser.add_argument("rank", type=int)
    parser.add_argument("spec", help="JSON: the cases or the forward jobs")
    parser.add_argument("out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(args.spec) as f:
        spec = json.load(f)
    if args.role == "layout":
        mcore_models.init_distributed(args.rank, spec["world"], spec["port"])
        out = layout(args, spec["cases"])
    elif args.role == "megatron":
        mcore_models.init_distributed(args.rank, spec["world"], spec["port"])
        out = {m: megatron_model(args, spec, m)
               for m in sorted(spec["models"])}
    else:
        out = {m: hf_model_run(spec, m) for m in sorted(spec["models"])}
    torch.save(out, args.out)


if __name__ == "__main__":
    main()
