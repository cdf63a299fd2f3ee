"""samples/python runs as a user would run it: a store, a trainer and two
engines; after every step both engines answer with the trainer's logits."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def test_the_python_sample_runs():
    run = os.path.join(ROOT, "samples", "python", "run.py")
    out = subprocess.run([sys.executable, run, "--steps", "3"], cwd="/",
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    trainer = dict(re.findall(r"trainer: step (\d+), .* logits (\w+)", out.stdout))
    engines = re.findall(r"engine (\d): step (\d+) committed \(\d+ bytes, "
                         r"verified True\), logits (\w+)", out.stdout)
    assert sorted(trainer) == ["1", "2", "3"], out.stdout
    assert len(engines) == 6, out.stdout
    for rank, step, digest in engines:
        assert digest == trainer[step], (rank, step, out.stdout)
    assert len(set(trainer.values())) == 3  # the weights changed every step
