"""The command line of the rank processes (ranks.py, reshard_ranks.py):

  python SCRIPT trainer|engine RANK JOBS.json OUT.pt --token T --job-id ID
                [--steps N]

JOBS.json maps each model to [job text, config.json path, rendezvous
address] (a store serves one job at a time, so each model has its own).
The script's run(args, job_text, config_path, address, model) runs one
job; what every model's run returns is saved to OUT.pt, for the test."""
import argparse
import json

import torch


def main(run):
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["trainer", "engine"])
    parser.add_argument("rank", type=int)
    parser.add_argument("jobs", help="JSON: model -> [job, config, address]")
    parser.add_argument("out")
    parser.add_argument("--token", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the same kernels, the same bits, everywhere
    with open(args.jobs) as f:
        jobs = json.load(f)
    out = {model: run(args, job_text, config_path, address, model)
           for model, (job_text, config_path, address) in sorted(jobs.items())}
    torch.save(out, args.out)
