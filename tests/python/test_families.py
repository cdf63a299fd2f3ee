"""Real models end to end, across processes, over shm and over ucx: for
every family a trainer process trains a transformers model and syncs it
into two engine processes holding the same model class, bound by
job.bind(model). After every step each engine's logits on a fixed batch,
and every parameter, are bitwise equal to the trainer's."""
import pytest
import torch

import families
import wex
from conftest import hf_job, run_ranks, write_json

STEPS = 3
TOKEN = "families-test"


@pytest.mark.parametrize("transport", ["shm", "ucx"])
def test_every_family_syncs_bitwise(transport, family_configs, tmp_path):
    stores = {f: wex.Store(token=TOKEN) for f in families.FAMILIES}
    try:
        jobs = {f: [wex._job.json.dumps(hf_job(family_configs[f], transport)),
                    family_configs[f], stores[f].address]
                for f in families.FAMILIES}
        jobs_path = write_json(tmp_path / "jobs.json", jobs)
        outs = {("trainer", 0): tmp_path / "trainer0.pt",
                ("engine", 0): tmp_path / "engine0.pt",
                ("engine", 1): tmp_path / "engine1.pt"}
        run_ranks("ranks.py", [(role, rank, str(out))
                               for (role, rank), out in outs.items()],
                  [jobs_path, "{out}", "--token", TOKEN,
                   "--job-id", "families-%s" % transport,
                   "--steps", str(STEPS)])
    finally:
        for s in stores.values():
            s.close()
    trainer = torch.load(outs[("trainer", 0)])
    engines = [torch.load(outs[("engine", r)]) for r in (0, 1)]
    for family in families.FAMILIES:
        for step in range(1, STEPS + 1):
            want = trainer[family][step]
            for r, engine in enumerate(engines):
                got = engine[family][step]
                where = "%s over %s, step %d, engine %d" % (family, transport,
                                                             step, r)
                assert got["report"]["committed_step"] == step, where
                assert got["report"]["verified"], where
                assert set(got["params"]) == set(want["params"]), where
                for name, tensor in want["params"].items():
                    assert torch.equal(got["params"][name], tensor), \
                        "%s: parameter %s differs" % (where, name)
                assert torch.equal(got["logits"], want["logits"]), \
                    "%s: logits differ" % where
        # the trainer really trained: step 1's logits are not step 3's
        assert not torch.equal(trainer[family][1]["logits"],
                               trainer[family][STEPS]["logits"]), family
