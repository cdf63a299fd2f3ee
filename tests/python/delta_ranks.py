"""One rank of test_delta, as its own process (the command line is
rank_main.py's). The trainer holds a Qwen3 in float32 (its master
weights), takes AdamW steps at the learning rate the job's name gives, and
after each copies the master weights into a bf16 copy of the model, in
place: the copy is what it binds and syncs. The engine holds the same
class in bf16 from another seed. Each saves, per step, its bf16
parameters, its logits on a fixed batch and the sync's report."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import rank_main  # noqa: E402
import wex  # noqa: E402


def tokens(seed, shape, vocab):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g)


def run(args, job_text, config_path, address, name):
    trainer = args.role == "trainer"
    lr = float(name.split("-", 1)[1])
    model = families.build(config_path, 0 if trainer else 1000 + args.rank)
    vocab = model.config.vocab_size
    master = optimizer = None
    if trainer:
        master = families.build(config_path, 0).float()
        optimizer = torch.optim.AdamW(master.parameters(), lr=lr)
    steps = {}
    with wex.Job(job_text, "source" if trainer else "destination", args.rank,
                 rendezvous=address, token=args.token,
                 job_id="%s-%s" % (args.job_id, name)) as job:
        job.bind(model)
        for step in range(1, args.steps + 1):
            if trainer and step > 1:
                master.train()
                batch = tokens(step, (4, 32), vocab)
                master(input_ids=batch, labels=batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                with torch.no_grad():
                    for p, m in zip(model.parameters(), master.parameters()):
                        p.copy_(m)  # bf16, rounded to nearest even
            report = job.sync(step)
            model.eval()
            with torch.no_grad():
                logits = model(input_ids=tokens(7, (2, 16), vocab)).logits
            steps[step] = {
                "logits": logits.clone(),
                "params": {k: v.detach().clone()
                           for k, v in model.state_dict().items()},
                "report": report._asdict(),
                "changed_fraction": report.changed_fraction,
            }
    return steps


if __name__ == "__main__":
    rank_main.main(run)
