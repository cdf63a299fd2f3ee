"""One rank of test_fp8, as its own process:

  python fp8_ranks.py source|destination RANK JOB.json ADDRESS TOKEN OUT.pt
                      [--steps N]

A source fills every local tensor it holds with fp8_values.make(name,
dtype, shape, step) (the test makes the same ones) and syncs; a
destination binds zeroed tensors and syncs. After every step each saves
what it holds, for the test to compare byte by byte."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_values  # noqa: E402
import wex  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("side", choices=["source", "destination"])
    parser.add_argument("rank", type=int)
    parser.add_argument("job")
    parser.add_argument("address")
    parser.add_argument("token")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(args.job) as f:
        job_text = f.read()
    held = {}
    with wex.Job(job_text, args.side, args.rank, rendezvous=args.address,
                 token=args.token, job_id="fp8") as job:
        tensors = {s.name: torch.zeros(s.shape, dtype=s.dtype)
                   for s in job.tensors}
        job.bind(tensors)
        for step in range(1, args.steps + 1):
            if args.side == "source":
                for name, t in tensors.items():
                    t.copy_(fp8_values.make(name, t.dtype, t.shape, step))
            report = job.sync(step)
            if args.side == "destination":
                assert report.committed_step == step and report.verified, report
            held[step] = {k: v.clone() for k, v in tensors.items()}
    torch.save(held, args.out)


if __name__ == "__main__":
    main()
