"""One rank of test_families, as its own process (the command line is
rank_main.py's). A trainer builds each family's model (seed 0), and every step takes one
AdamW step on random tokens and syncs; an engine builds the same model
class from another seed and syncs. Both bind the model itself
(``job.bind(model)``: the state dict's names are hf's local tensor names).
After each step each saves its logits on a fixed batch and its parameters,
for the test to compare bitwise. One process serves every family given, one
job each, so torch is imported once.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import rank_main  # noqa: E402
import wex  # noqa: E402


def tokens(seed, shape):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, families.DENSE["vocab_size"], shape, generator=g)


def run_family(args, job_text, config_path, address, family):
    trainer = args.role == "trainer"
    model = families.build(config_path, 0 if trainer else 1000 + args.rank)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2) if trainer else None
    side = "source" if trainer else "destination"
    steps = {}
    with wex.Job(job_text, side, args.rank, rendezvous=address,
                 token=args.token, job_id="%s-%s" % (args.job_id, family)) as job:
        job.bind(model)
        for step in range(1, args.steps + 1):
            if trainer:
                model.train()
                batch = tokens(step, (2, 12))
                loss = model(input_ids=batch, labels=batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            report = job.sync(step)
            model.eval()
            with torch.no_grad():
                logits = model(input_ids=tokens(7, (2, 8))).logits
            steps[step] = {
                "logits": logits.clone(),
                "params": {k: v.detach().clone()
                           for k, v in model.state_dict().items()},
                "report": report._asdict(),
            }
    return steps


if __name__ == "__main__":
    rank_main.main(run_family)
