"""What a transformers model's modules hold: the ``hf`` and ``fsdp``
engines' ``options.modules`` (docs/python.md, "transformers 4 and 5").

transformers 4 holds a checkpoint's tensors under their own names;
transformers 5 stacks each MoE layer's experts (``experts.gate_up_proj``,
``experts.down_proj``), names Mixtral's ``block_sparse_moe`` ``mlp`` and
keeps DeepSeek's router in float32. The engines lay out either; a job
names which in its config, the same for every rank (each rank lays out
both sides), so it is the job's to say, not a rank's to guess.
"""
from __future__ import annotations

from typing import Any

_STACKED = ("experts.gate_up_proj", "experts.down_proj")


def _transformers_major() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("transformers").split(".")[0]
    except metadata.PackageNotFoundError:
        return None


def module_layout(model: Any) -> str:
    """The ``"modules"`` option that lays out `model` (a torch.nn.Module):
    "transformers-5" when it holds stacked experts, or is a transformers
    model under transformers 5; "transformers-4" for one under 4.x;
    "checkpoint" otherwise."""
    names = [n for n, _ in model.named_parameters()]
    if any(n.endswith(_STACKED) for n in names):
        return "transformers-5"
    if type(model).__module__.startswith("transformers."):
        major = _transformers_major()
        if major in ("4", "5"):
            return "transformers-%s" % major
    return "checkpoint"


def hint(unknown: list[str]) -> str:
    """What to tell a bind that met tensors the job does not have, when
    they are transformers 5's stacked experts; "" otherwise."""
    if not any(n.endswith(_STACKED) for n in unknown):
        return ""
    return ("; the model holds transformers 5's stacked experts: lay the "
            "job out as it does with \"modules\": \"transformers-5\" in the "
            "hf or fsdp engine's options (wex.module_layout(model) says "
            "which)")
