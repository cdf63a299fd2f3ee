"""One rank of test_resharded, as its own process (the command line is
rank_main.py's). A trainer is one rank of a Megatron-Core tp x pp job: it builds the model
(seed 0) and, every step, takes one AdamW step on random tokens, slices the
model into its Megatron local tensors (megatron_reference.shard), copies
them into the tensors it bound and syncs. Every trainer rank trains the
whole model identically (one thread, the same bits), so their shards are
consistent. Trainer rank 0 saves its logits on a fixed batch and its
parameters after each step.

An engine is one rank of a vLLM tp x dp deployment: replica 0 binds the
zeroed tensors vllm_reference says its rank holds, replica 1 lets wex
allocate them (job.allocate()); after each step it saves a copy of them.
Every rank saves its sync reports. One process serves every model given,
one job each, so torch is imported once.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_reference  # noqa: E402
import reshard_models  # noqa: E402
import vllm_reference  # noqa: E402
import rank_main  # noqa: E402
import wex  # noqa: E402

TP, PP, DP = reshard_models.TP, reshard_models.PP, reshard_models.DP


def tokens(seed, shape, vocab):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g)


def train(args, job, config_path, config):
    import families
    model = families.build(config_path, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def slices():
        return megatron_reference.shard(
            families.checkpoint_state(model.state_dict()), config, TP, PP,
            args.rank)

    bound = slices()
    job.bind(bound)
    steps = {}
    for step in range(1, args.steps + 1):
        model.train()
        batch = tokens(step, (2, 12), config["vocab_size"])
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        for name, tensor in slices().items():  # into the bound memory
            bound[name].copy_(tensor)
        report = job.sync(step)
        steps[step] = {"report": report._asdict(),
                       "paths": {d: job.peer_path(d) for d in range(TP * DP)}}
        if args.rank == 0:
            model.eval()
            with torch.no_grad():
                logits = model(input_ids=tokens(7, (2, 8),
                                                config["vocab_size"])).logits
            steps[step]["logits"] = logits.clone()
            steps[step]["params"] = {
                k: v.detach().clone() for k, v in
                families.checkpoint_state(model.state_dict()).items()}
    return steps


def serve(args, job, config):
    where = vllm_reference.coords(args.rank, TP, dp=DP)
    if where["dp"] == 0:
        tensors = vllm_reference.zeros(config, TP, where["tp"])
        job.bind(tensors)
    else:
        tensors = job.allocate()
    steps = {}
    for step in range(1, args.steps + 1):
        report = job.sync(step)
        steps[step] = {"report": report._asdict(),
                       "tensors": {k: v.clone() for k, v in tensors.items()}}
    return steps


def run_model(args, job_text, config_path, address, model):
    config = reshard_models.read_config(config_path)
    side = "source" if args.role == "trainer" else "destination"
    job_id = "%s-%s" % (args.job_id, model)
    with wex.Job(job_text, side, args.rank, rendezvous=address,
                 token=args.token, job_id=job_id) as job:
        if args.role == "trainer":
            return train(args, job, config_path, config)
        return serve(args, job, config)


if __name__ == "__main__":
    rank_main.main(run_model)
