"""samples/python/ray_loop.py as a user runs it: a trainer actor and
engine actors on a local Ray cluster, engines added and killed while the
trainer steps; after every step each engine there answers with the
trainer's logits, and the trainer's reports count the replicas."""
import os
import re
import subprocess
import sys

from conftest import ROOT

# step -> (replicas committed, joined, left), as the sample's events make them
REPLICAS = {1: (1, 1, 0), 2: (2, 1, 0), 3: (3, 1, 0), 4: (2, 0, 1),
            5: (3, 1, 0), 6: (3, 0, 0)}
ENGINES = {1: [0], 2: [0, 1], 3: [0, 1, 2], 4: [0, 2], 5: [0, 1, 2],
           6: [0, 1, 2]}


def test_the_ray_sample_adds_and_kills_engines_while_training():
    sample = os.path.join(ROOT, "samples", "python", "ray_loop.py")
    out = subprocess.run([sys.executable, sample, "--steps", "6"], cwd="/",
                         capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    trainer = {int(s): (int(c), int(j), int(l), d) for s, c, j, l, d in
               re.findall(r"trainer: step (\d+), (\d+) replicas committed "
                          r"\((\d+) joined, (\d+) left\), logits (\w+)", text)}
    assert sorted(trainer) == list(range(1, 7)), text
    for step, want in REPLICAS.items():
        assert trainer[step][:3] == want, (step, trainer[step], text)
    engines = re.findall(r"engine (\d): step (\d+) committed \((\w+)\), "
                         r"logits (\w+)", text)
    seen = {}
    for rank, step, _, digest in engines:
        assert digest == trainer[int(step)][3], (rank, step, text)
        seen.setdefault(int(step), []).append(int(rank))
    assert {s: sorted(r) for s, r in seen.items()} == ENGINES, text
    assert "DIFFERS" not in text
    assert len({t[3] for t in trainer.values()}) == 6  # it really trained
