"""One rank of test_checkpoint's Python API test, as its own process:

  python checkpoint_ranks.py source|destination RANK JOB.json ADDRESS TOKEN
                             CHECKPOINT OUT

A source opens its job with checkpoint=CHECKPOINT and syncs one step; a
destination binds zeroed tensors, syncs, saves what it holds to OUT with
job.save (small shards, so there are several) and writes its tensors to
OUT.pt for the test."""
import sys

import torch

import wex


def main():
    side, rank, job_path, address, token, checkpoint, out = sys.argv[1:8]
    with open(job_path) as f:
        job_text = f.read()
    if side == "source":
        with wex.Job(job_text, side, int(rank), rendezvous=address,
                     token=token, job_id="ckpt", checkpoint=checkpoint) as job:
            job.sync(1)
        return
    with wex.Job(job_text, side, int(rank), rendezvous=address, token=token,
                 job_id="ckpt") as job:
        tensors = {s.name: torch.zeros(s.shape, dtype=s.dtype)
                   for s in job.tensors}
        job.bind(tensors)
        report = job.sync(1)
        assert report.committed_step == 1 and report.verified, report
        job.save(out, shard_bytes=100_000)
        torch.save(tensors, out + ".pt")


if __name__ == "__main__":
    main()
