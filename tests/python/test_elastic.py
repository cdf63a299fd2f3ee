"""Elastic destination replicas from Python: a trainer process syncs six
steps of a Qwen3 it really trains while engine processes join (job.sync()
without a step) at steps 1, 2 and 4 and one leaves (job.leave()) before
step 5. Every engine's parameters and logits are bitwise the trainer's at
each step it committed, the trainer's step never fails, and its reports
count the replicas that took part, joined and left."""
import json

import torch

import wex
from conftest import run_ranks, write_json
from test_delta import bigger_qwen3  # noqa: F401  (a fixture)

STEPS = 6
TOKEN = "elastic-test"
# step -> (replicas, joined, left), as the trainer's reports count them
REPLICAS = {1: (1, 1, 0), 2: (2, 1, 0), 3: (2, 0, 0), 4: (3, 1, 0),
            5: (2, 0, 1), 6: (2, 0, 0)}
COMMITTED = {0: range(1, 7), 1: range(2, 5), 2: range(4, 7)}


def test_engines_join_and_leave_a_training_run(bigger_qwen3, tmp_path):  # noqa: F811
    store = wex.Store(token=TOKEN)
    try:
        job = {"model": bigger_qwen3, "source": {"engine": "hf"},
               "destination": {"engine": "hf", "parallel": {"dp": 3},
                               "elastic": {"min_replicas": 1}},
               "transport": "shm", "verify": "digest",
               "timeouts": {"connect_seconds": 120, "step_seconds": 60,
                            "join_seconds": 120}}
        jobs_path = write_json(tmp_path / "jobs.json",
                               {"qwen3": [json.dumps(job), bigger_qwen3,
                                          store.address]})
        outs = {("trainer", 0): tmp_path / "trainer.pt"}
        for k in range(3):
            outs[("engine", k)] = tmp_path / ("engine-%d.pt" % k)
        run_ranks("elastic_ranks.py",
                  [(role, rank, str(out)) for (role, rank), out in outs.items()],
                  [jobs_path, "{out}", "--token", TOKEN, "--job-id", "elastic",
                   "--steps", str(STEPS)])
    finally:
        store.close()
    trainer = torch.load(outs[("trainer", 0)])["qwen3"]
    for step, (replicas, joined, left) in REPLICAS.items():
        report = trainer[step]["report"]
        assert (report["replicas"], report["replicas_committed"],
                report["replicas_joined"], report["replicas_left"]) == \
            (replicas, replicas, joined, left), "trainer, step %d" % step
        print("step %d: %d replicas committed, %d joined, %d left"
              % (step, replicas, joined, left))
    for k, steps in COMMITTED.items():
        engine = torch.load(outs[("engine", k)])["qwen3"]
        assert sorted(engine) == list(steps), "engine %d's steps" % k
        for step in steps:
            want, got = trainer[step], engine[step]
            for name, tensor in want["params"].items():
                assert torch.equal(got["params"][name], tensor), \
                    "engine %d, step %d: %s differs" % (k, step, name)
            assert torch.equal(got["logits"], want["logits"]), \
                "engine %d, step %d: logits" % (k, step)
        first = engine[steps[0]]["report"]
        assert first["step"] == steps[0] and first["mode"] == "full"
    assert not torch.equal(trainer[1]["logits"], trainer[STEPS]["logits"])
