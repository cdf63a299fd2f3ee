"""One rank of test_elastic, as its own process (the command line is
rank_main.py's; the directory of OUT.pt holds the files the ranks
coordinate by). The trainer holds a Qwen3 in float32, takes an AdamW step
before each sync and binds its bf16 copy; engine k holds the same class in
bf16 from another seed and is replica k of an elastic job. Engine 0 is
there from step 1, engine 1 joins at step 2 and leaves before step 5,
engine 2 joins at step 4: an engine that joins starts only once the
trainer has finished the step before, and the trainer starts a step only
once the engines due at it have connected (or, for step 5, engine 1 has
left). Each saves, per step it committed, its parameters, its logits on a
fixed batch and the sync's report."""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import rank_main  # noqa: E402
import wex  # noqa: E402

JOINS = {0: 1, 1: 2, 2: 4}  # engine -> the step it joins at
LEAVES = {1: 5}             # engine -> the step it is gone before


def tokens(seed, shape, vocab):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g)


def await_file(path, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError("%s did not appear within %.0f s"
                               % (path, timeout))
        time.sleep(0.01)


def touch(path):
    with open(path, "w"):
        pass


def record(model, vocab, report):
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=tokens(7, (2, 16), vocab)).logits
    return {"logits": logits.clone(), "report": report._asdict(),
            "params": {k: v.detach().clone()
                       for k, v in model.state_dict().items()}}


def trainer(args, job_text, config_path, address, where):
    model = families.build(config_path, 0)
    master = families.build(config_path, 0).float()
    optimizer = torch.optim.AdamW(master.parameters(), lr=1e-5)
    vocab = model.config.vocab_size
    steps = {}
    with wex.Job(job_text, "source", 0, rendezvous=address, token=args.token,
                 job_id=args.job_id) as job:
        job.bind(model)
        job.connect()
        for step in range(1, args.steps + 1):
            for engine, at in JOINS.items():
                if at == step:
                    await_file(os.path.join(where, "connected-%d" % engine))
            for engine, at in LEAVES.items():
                if at == step:
                    await_file(os.path.join(where, "left-%d" % engine))
            if step > 1:
                master.train()
                batch = tokens(step, (4, 32), vocab)
                master(input_ids=batch, labels=batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                with torch.no_grad():
                    for p, m in zip(model.parameters(), master.parameters()):
                        p.copy_(m)
            steps[step] = record(model, vocab, job.sync(step))
            touch(os.path.join(where, "synced-%d" % step))
    return steps


def engine(args, job_text, config_path, address, where):
    at = JOINS[args.rank]
    if at > 1:
        await_file(os.path.join(where, "synced-%d" % (at - 1)))
    model = families.build(config_path, 1000 + args.rank)
    vocab = model.config.vocab_size
    last = LEAVES.get(args.rank, args.steps + 1) - 1
    steps = {}
    with wex.Job(job_text, "destination", args.rank, rendezvous=address,
                 token=args.token, job_id=args.job_id) as job:
        job.bind(model)
        job.connect()
        touch(os.path.join(where, "connected-%d" % args.rank))
        report = job.sync()  # joins the next step that takes it
        steps[report.step] = record(model, vocab, report)
        for step in range(report.step + 1, last + 1):
            steps[step] = record(model, vocab, job.sync(step))
        if args.rank in LEAVES:
            job.leave()
            touch(os.path.join(where, "left-%d" % args.rank))
    return steps


def run(args, job_text, config_path, address, name):
    where = os.path.dirname(os.path.abspath(args.out))
    if args.role == "trainer":
        return trainer(args, job_text, config_path, address, where)
    return engine(args, job_text, config_path, address, where)


if __name__ == "__main__":
    rank_main.main(run)
