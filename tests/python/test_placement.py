"""Experts that move (EPLB): a transformers Qwen3-MoE trainer into a vLLM
server of TP2 = EP2 with 2 redundant experts, over shm, whose engines
call job.set_placement between steps. After every step each physical
slot of each engine holds its logical expert's weights as the trainer
had them at that step, under the placement of that step; a map that is
not a placement is refused naming the layer and the slot."""
import json

import pytest
import torch

import wex
from conftest import run_ranks
from placement_ranks import PLACEMENTS

TOKEN = "placement-test-token"
STEPS = 3


def write_json(path, doc):
    path.write_text(json.dumps(doc))
    return str(path)


def job_text(config):
    return json.dumps({
        "model": config, "source": {"engine": "hf"},
        "destination": {"engine": "vllm", "parallel": {"tp": 2, "ep": 2},
                        "options": {"redundant_experts": 2}},
        "transport": "shm", "verify": "digest",
        "timeouts": {"connect_seconds": 120, "step_seconds": 120}})


def slot_map(step):
    return PLACEMENTS[step] or [[p % 4 for p in range(6)]] * 2


def test_engines_follow_their_placement_every_step(family_configs, tmp_path):
    config = family_configs["qwen3_moe"]
    with wex.Store(token=TOKEN) as store:
        jobs = write_json(tmp_path / "jobs.json",
                          {"qwen3_moe": [job_text(config), config,
                                         store.address]})
        outs = {("trainer", 0): tmp_path / "trainer.pt",
                ("engine", 0): tmp_path / "engine-0.pt",
                ("engine", 1): tmp_path / "engine-1.pt"}
        run_ranks("placement_ranks.py",
                  [(role, rank, str(out)) for (role, rank), out in outs.items()],
                  [jobs, "{out}", "--token", TOKEN, "--job-id", "placement",
                   "--steps", str(STEPS)])
    trained = torch.load(outs[("trainer", 0)])["qwen3_moe"]
    checked = 0
    for rank in (0, 1):
        engine = torch.load(outs[("engine", rank)])["qwen3_moe"]
        for step in range(1, STEPS + 1):
            want, held = trained[step], engine[step]
            for layer in range(2):
                pre = "model.layers.%d.mlp.experts." % layer
                w13, w2 = held[pre + "w13_weight"], held[pre + "w2_weight"]
                assert w13.shape[0] == 3, w13.shape
                for j in range(3):
                    slot = rank * 3 + j
                    x = slot_map(step)[layer][slot]
                    gate = want[pre + "%d.gate_proj.weight" % x]
                    up = want[pre + "%d.up_proj.weight" % x]
                    down = want[pre + "%d.down_proj.weight" % x]
                    assert torch.equal(w13[j], torch.cat([gate, up])), \
                        (step, rank, layer, slot, x)
                    assert torch.equal(w2[j], down), (step, rank, layer, slot)
                    checked += 1
    assert checked == 2 * STEPS * 2 * 3
    # the placements did change what slots held
    assert slot_map(2) != slot_map(1) and slot_map(3) != slot_map(2)


def test_a_map_that_is_no_placement_is_refused(family_configs):
    config = family_configs["qwen3_moe"]
    with wex.Job(job_text(config), "destination", 0,
                 token=TOKEN) as job:
        with pytest.raises(wex.WexError) as e:
            job.set_placement(torch.tensor([[0, 1, 2, 0, 1, 2],
                                            [0, 1, 2, 3, 0, 1]]))
        assert ("options/expert_placement/physical_to_logical/0: layer 0 "
                "holds logical expert 3 in no slot") in str(e.value)
        assert "\n" not in str(e.value)
        with pytest.raises(wex.WexError) as e:
            job.set_placement(torch.tensor([0, 1, 2, 3, 0, 1]))
        assert "expected a [layers, slots] tensor of integers" in str(e.value)
        with pytest.raises(wex.WexError) as e:
            job.set_placement([[0.5] * 6] * 2)
        assert "of integers" in str(e.value)
    dense = json.loads(job_text(family_configs["qwen3"]))
    dense["destination"].update(parallel={"tp": 2}, options={})
    with wex.Job(json.dumps(dense), "destination", 0, token=TOKEN) as job:
        with pytest.raises(wex.WexError) as e:
            job.set_placement(torch.tensor(slot_map(2)))
        assert "the model has no routed experts" in str(e.value)
    with wex.Job(job_text(config), "source", 0, token=TOKEN) as job:
        with pytest.raises(wex.WexError) as e:
            job.set_placement(torch.tensor(slot_map(2)))
        assert "only a destination's experts move" in str(e.value)
