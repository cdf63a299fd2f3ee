"""The trainer of test_adopt.py, as its own process:

  python adopt_trainer.py JOB.json CONFIG.json ADDRESS TOKEN JOB_ID OUT STEPS

Builds the model of CONFIG.json (seed 0), binds it as source rank 0 and,
every step, takes one AdamW step on random tokens and syncs; saves each
step's parameters (state-dict names) and logits on a fixed batch to OUT.pt,
for the test to compare with the engine's."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import wex  # noqa: E402


def tokens(seed, shape):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, families.DENSE["vocab_size"], shape, generator=g)


def main(job_path, config_path, address, token, job_id, out, steps):
    torch.set_num_threads(1)  # the engine's kernels, the engine's bits
    with open(job_path) as f:
        job_doc = json.load(f)
    model = families.build(config_path, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    saved = {}
    with wex.Job(job_doc, "source", 0, rendezvous=address, token=token,
                 job_id=job_id) as job:
        job.bind(model)
        for step in range(1, int(steps) + 1):
            model.train()
            batch = tokens(step, (2, 12))
            model(input_ids=batch, labels=batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            job.sync(step)
            model.eval()
            with torch.no_grad():
                logits = model(input_ids=tokens(7, (2, 8))).logits
            saved[step] = {"logits": logits.clone(),
                           "params": {k: v.detach().clone() for k, v in
                                      model.state_dict().items()}}
    torch.save(saved, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
