"""Runs the sample: serves the job's rendezvous in this process, starts
the trainer and two engines as processes of their own, and waits.

    python samples/python/run.py [--steps 5]
"""
import argparse
import os
import subprocess
import sys

import wex

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

with wex.Store(token="sample") as store:
    common = ["--rendezvous", store.address, "--token", "sample",
              "--steps", str(args.steps)]
    ranks = [[os.path.join(HERE, "trainer.py")] + common] + [
        [os.path.join(HERE, "engine.py"), "--rank", str(r)] + common
        for r in (0, 1)]
    procs = [subprocess.Popen([sys.executable] + r) for r in ranks]
    codes = [p.wait() for p in procs]
sys.exit(max(codes))
