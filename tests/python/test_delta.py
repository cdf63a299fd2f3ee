"""Delta steps with a model really trained: a trainer process holds a
Qwen3 in float32 and takes AdamW steps (lr 1e-6 and 1e-5), its bf16 copy
bound as the source of a job with "delta": true; an engine process holds
the same class in bf16. After every step the engine's parameters and
logits are bitwise the trainer's bf16 copy's, and from the second step on
only what changed crossed the wire: the test prints, per step, the
fraction of elements that changed, the bytes on the wire against the full
step's and against an int32 index and a bf16 value per changed element."""
import json

import pytest
import torch

import families
import wex
from conftest import run_ranks, write_json

STEPS = 4
TOKEN = "delta-test"
LEARNING_RATES = ("1e-6", "1e-5")


@pytest.fixture(scope="module")
def bigger_qwen3(tmp_path_factory):
    """A Qwen3 with enough elements for a fraction to mean something."""
    import transformers
    config = transformers.Qwen3Config(
        vocab_size=1024, hidden_size=256, intermediate_size=512,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, max_position_embeddings=128, tie_word_embeddings=True)
    config.architectures = ["Qwen3ForCausalLM"]
    directory = tmp_path_factory.mktemp("qwen3-delta")
    config.save_pretrained(directory)
    path = directory / "config.json"
    doc = json.loads(path.read_text())
    doc["torch_dtype"] = "bfloat16"
    path.write_text(json.dumps(doc))
    return str(path)


def test_trained_model_syncs_bitwise_with_deltas(bigger_qwen3, tmp_path):
    stores = {lr: wex.Store(token=TOKEN) for lr in LEARNING_RATES}
    try:
        jobs = {}
        for lr in LEARNING_RATES:
            job = {"model": bigger_qwen3, "source": {"engine": "hf"},
                   "destination": {"engine": "hf"}, "transport": "shm",
                   "verify": "digest", "delta": True,
                   "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
            jobs["lr-" + lr] = [json.dumps(job), bigger_qwen3,
                                stores[lr].address]
        jobs_path = write_json(tmp_path / "jobs.json", jobs)
        outs = {("trainer", 0): tmp_path / "trainer.pt",
                ("engine", 0): tmp_path / "engine.pt"}
        run_ranks("delta_ranks.py", [(role, rank, str(out))
                                     for (role, rank), out in outs.items()],
                  [jobs_path, "{out}", "--token", TOKEN, "--job-id", "delta",
                   "--steps", str(STEPS)])
    finally:
        for s in stores.values():
            s.close()
    trainer = torch.load(outs[("trainer", 0)])
    engine = torch.load(outs[("engine", 0)])
    for lr in LEARNING_RATES:
        name = "lr-" + lr
        for step in range(1, STEPS + 1):
            want, got = trainer[name][step], engine[name][step]
            where = "lr %s, step %d" % (lr, step)
            for k, tensor in want["params"].items():
                assert torch.equal(got["params"][k], tensor), \
                    "%s: parameter %s differs" % (where, k)
            assert torch.equal(got["logits"], want["logits"]), where
            report = got["report"]
            full = report["bytes"]
            changed = report["changed_elements"]
            print("lr %s step %d: mode %s, %.2f %% of elements changed, %d "
                  "bytes on the wire of %d (%.2f %%); int32 index + value "
                  "would be %d (%.2f %%)"
                  % (lr, step, report["mode"],
                     100 * got["changed_fraction"], report["wire_bytes"],
                     full, 100 * report["wire_bytes"] / full, changed * 6,
                     100 * changed * 6 / full))
            if step == 1:
                assert report["mode"] == "full", where
                continue
            assert report["mode"] in ("delta", "mixed"), where
            assert 0 < got["changed_fraction"] < 0.5, where
            assert report["wire_bytes"] < full / 2, where
        assert not torch.equal(trainer[name][1]["logits"],
                               trainer[name][STEPS]["logits"]), \
            "the trainer really trained at lr %s" % lr
    # at 1e-6 almost nothing changes: a delta is a small part of the step
    small = engine["lr-1e-6"][STEPS]["report"]
    assert small["wire_bytes"] * 10 < small["bytes"]
