"""transformers 4 and 5 (docs/python.md): wex.module_layout says which
"modules" option lays out a model, a job laid out as transformers 5 holds
each MoE layer's experts stacked, and binding stacked experts to a job
laid out as the checkpoint is refused naming the option. Runs under either
transformers: the stacked model here is built by hand, as 5.x holds it."""
import pytest
import torch

import families
import wex

TOKEN = "modules-test"


def job_dict(config, modules=None):
    options = {"options": {"modules": modules}} if modules else {}
    return {"model": config, "source": {"engine": "hf", **options},
            "destination": {"engine": "hf", **options}, "transport": "shm"}


def stacked(job):
    """A module holding what the rank holds, under its names: as a
    transformers 5 MoE model holds it."""
    root = torch.nn.Module()
    for spec in job.tensors:
        *path, leaf = spec.name.split(".")
        node = root
        for part in path:
            if not hasattr(node, part):
                node.add_module(part, torch.nn.Module())
            node = getattr(node, part)
        node.register_parameter(leaf, torch.nn.Parameter(
            torch.zeros(spec.shape, dtype=spec.dtype), requires_grad=False))
    return root


def test_module_layout_of_models(family_configs):
    config = family_configs["qwen3_moe"]
    with wex.Job(job_dict(config, "transformers-5"), "source", 0,
                 token=TOKEN) as job:
        names = [s.name for s in job.tensors]
        # the experts stacked: [E, 2 * moe_intermediate, hidden], [E, H, I]
        shapes = {s.name: tuple(s.shape) for s in job.tensors}
        assert shapes["model.layers.0.mlp.experts.gate_up_proj"] == (4, 64, 64)
        assert shapes["model.layers.0.mlp.experts.down_proj"] == (4, 64, 32)
        assert not any(".experts.0." in n for n in names)
        model = stacked(job)
    assert wex.module_layout(model) == "transformers-5"
    assert wex.module_layout(torch.nn.Linear(2, 2)) == "checkpoint"
    built = families.build(config, 0)
    assert wex.module_layout(built) == families.MODULES


def test_stacked_experts_into_a_checkpoint_job_are_named(family_configs):
    config = family_configs["qwen3_moe"]
    with wex.Job(job_dict(config, "transformers-5"), "source", 0,
                 token=TOKEN) as job:
        model = stacked(job)
    with wex.Job(job_dict(config), "source", 0, token=TOKEN) as job:
        with pytest.raises(wex.WexError) as e:
            job.bind(model)
    message = str(e.value)
    assert "experts.gate_up_proj" in message or "missing" in message
    assert '"modules": "transformers-5"' in message, message
    assert "\n" not in message


def test_unknown_modules_refused(family_configs):
    with pytest.raises(wex.WexError) as e:
        wex.Job(job_dict(family_configs["llama"], "transformers-6"), "source",
                0, token=TOKEN)
    assert "/options/modules: expected one of" in str(e.value), e.value
    assert '"transformers-5", got "transformers-6"' in str(e.value), e.value
