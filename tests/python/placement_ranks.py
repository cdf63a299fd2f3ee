"""One rank of test_placement, as its own process (the command line is
rank_main.py's). The trainer binds a transformers Qwen3-MoE (4 experts) as
the hf source and changes its weights before every step; the engines are
the two ranks of a vLLM server of TP2 = EP2 with 2 redundant experts (6
slots, 3 a rank), holding tensors of their own under the engine's names.
Before each step after the first every engine hands the job a new
placement (the same on both ranks, as one server's EPLB has one map) and
records, per step, each slot's logical expert and the bytes it holds."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import rank_main  # noqa: E402
import wex  # noqa: E402

# step -> [layer][slot] logical experts (6 slots of 4 experts)
PLACEMENTS = {
    1: None,  # the job's options: linear, slot p holds p % 4
    2: [[3, 2, 1, 0, 3, 3], [1, 1, 0, 2, 3, 0]],
    3: [[0, 0, 1, 1, 2, 3], [2, 3, 1, 0, 2, 1]],
}


def trainer(args, job_text, config_path, address, where):
    model = families.build(config_path, 0)
    with wex.Job(job_text, "source", args.rank, rendezvous=address,
                 token=args.token, job_id=args.job_id) as job:
        job.bind(model, adopt=False)
        states = {}
        for step in range(1, args.steps + 1):
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 0.01)
            job.sync(step)
            states[step] = {k: v.detach().clone()
                            for k, v in model.state_dict().items()}
    return states


def engine(args, job_text, config_path, address, where):
    with wex.Job(job_text, "destination", args.rank, rendezvous=address,
                 token=args.token, job_id=args.job_id) as job:
        tensors = {t.name: torch.zeros(t.shape, dtype=t.dtype)
                   for t in job.tensors}
        job.bind(tensors, adopt=False)
        steps = {}
        for step in range(1, args.steps + 1):
            if PLACEMENTS[step] is not None:
                job.set_placement(torch.tensor(PLACEMENTS[step]))
            job.sync(step)
            steps[step] = {k: v.clone() for k, v in tensors.items()}
    return steps


def run(args, job_text, config_path, address, where):
    return (trainer if args.role == "trainer" else engine)(
        args, job_text, config_path, address, where)


if __name__ == "__main__":
    rank_main.main(run)
