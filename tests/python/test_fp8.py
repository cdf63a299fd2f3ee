"""FP8 on the wire, checked against torch on every byte of real syncs
between processes, over shm and over ucx: a bf16 trainer's weights into
an engine holding the FP8 checkpoint format (e4m3 plus a float32
weight_scale_inv per 128 x 128 block), quantized on the sender, and an FP8
checkpoint into a bf16 engine, dequantized. The model's shapes have
ragged edges (no dimension a multiple of 128 but the experts'), and the
sources plant an all-zero block and a block with one huge value (the rest
falls to e4m3 subnormals and zero) in every weight."""
import json
import math

import pytest
import torch

import fp8_values
import wex
from conftest import ROOT, run_ranks, write_json

STEPS = 2
TOKEN = "fp8-test"
TINY = ROOT + "/tests/data/models/DeepSeek-V3-tiny-fp8.config.json"
RAGGED = {"hidden_size": 320, "intermediate_size": 200,
          "moe_intermediate_size": 136, "q_lora_rank": 192,
          "kv_lora_rank": 160, "num_attention_heads": 2,
          "num_key_value_heads": 2, "qk_nope_head_dim": 48,
          "qk_rope_head_dim": 32, "v_head_dim": 40, "vocab_size": 300,
          "num_hidden_layers": 2, "n_routed_experts": 2}


@pytest.fixture(scope="module")
def ragged_config(tmp_path_factory):
    with open(TINY) as f:
        config = json.load(f)
    config.update(RAGGED)
    path = tmp_path_factory.mktemp("fp8") / "config.json"
    return write_json(path, config)


def sync(tmp_path, config, source_options, destination_options, transport):
    """One source and one destination rank, hf on both sides, STEPS steps:
    what each held after each step."""
    job = {"model": config,
           "source": {"engine": "hf", "options": source_options},
           "destination": {"engine": "hf", "options": destination_options},
           "transport": transport,
           "timeouts": {"connect_seconds": 60, "step_seconds": 60}}
    if transport == "ucx":
        job["topology"] = {"placement": "disaggregated", "gpus_per_host": 1}
    job_path = write_json(tmp_path / "job.json", job)
    outs = {side: str(tmp_path / ("%s.pt" % side))
            for side in ("source", "destination")}
    with wex.Store(token=TOKEN) as store:
        run_ranks("fp8_ranks.py", [(side, 0, out) for side, out in outs.items()],
                  [job_path, store.address, TOKEN, "{out}",
                   "--steps", str(STEPS)])
    return (torch.load(outs["source"]), torch.load(outs["destination"]))


def bits(t):
    return t.contiguous().view(torch.uint8)


def half_e4m3_step(y):
    """Half the spacing of e4m3 values around |y| (subnormals: 2^-9)."""
    e = torch.floor(torch.log2(y.abs().clamp(min=2.0 ** -6)))
    return torch.pow(2.0, e - 3) / 2


@pytest.mark.parametrize("transport", ["shm", "ucx"])
def test_bf16_trainer_into_fp8_engine(transport, ragged_config, tmp_path):
    sources, destinations = sync(tmp_path, ragged_config, {"dtype": "bf16"},
                                 {"dtype": "checkpoint"}, transport)
    for step in range(1, STEPS + 1):
        src, dst = sources[step], destinations[step]
        weights = [n for n, t in dst.items() if t.dtype == torch.float8_e4m3fn]
        assert len(weights) >= 10, sorted(dst)
        assert not any(n.endswith("_scale_inv") for n in src), \
            "a bf16 trainer holds no block scales"
        for name, got in dst.items():
            where = "%s over %s, step %d" % (name, transport, step)
            if name.endswith("_scale_inv"):
                continue
            if got.dtype != torch.float8_e4m3fn:
                # as it is, or converted (the checkpoint's float32
                # e_score_correction_bias from the trainer's bf16)
                want = src[name].to(got.dtype)
                assert torch.equal(bits(got), bits(want)), where
                continue
            x = src[name]
            want, scale = fp8_values.quantize(x)
            got_scale = dst[name + "_scale_inv"]
            assert torch.equal(bits(got), bits(want)), \
                "%s: %d e4m3 bytes differ" % (where, int(
                    (bits(got) != bits(want)).sum()))
            assert torch.equal(got_scale, scale), "%s: scale_inv" % where
            # every element within half an e4m3 step of its scaled value
            amax = (scale * fp8_values.E4M3_MAX)
            mult = (fp8_values.E4M3_MAX / amax).repeat_interleave(
                128, 0).repeat_interleave(128, 1)[:x.shape[0], :x.shape[1]]
            y = x.float() * mult
            assert bool(((got.float() - y).abs() <= half_e4m3_step(y)).all()), where
            # the planted blocks did what they are there for
            assert bool((got[:128, :128].float() == 0).all()), where
            assert float(got_scale[0, 0]) == pytest.approx(1e-4 / 448), where
            if x.shape[0] <= 3:
                continue
            if x.shape[1] > 128 + 5:
                huge = torch.tensor(3000.0, dtype=torch.bfloat16).float()
                assert float(got_scale[0, 1]) == float(huge / 448), where
                tiny = got[:128, 128:256].float().abs()
                assert bool(((tiny > 0) & (tiny < 2.0 ** -6)).any()), \
                    "%s: no subnormal in the block of one huge value" % where
                assert bool((tiny == 0).any()), where
        ragged = [n for n in weights
                  if any(d % 128 for d in dst[n].shape)]
        assert ragged, "no weight has a ragged edge"
    # the weights changed between steps, and so did what landed
    assert not torch.equal(bits(destinations[1][weights[0]]),
                           bits(destinations[2][weights[0]]))


@pytest.mark.parametrize("transport", ["shm", "ucx"])
def test_fp8_checkpoint_into_bf16_engine(transport, ragged_config, tmp_path):
    sources, destinations = sync(tmp_path, ragged_config,
                                 {"dtype": "checkpoint"}, {"dtype": "bf16"},
                                 transport)
    for step in range(1, STEPS + 1):
        src, dst = sources[step], destinations[step]
        assert not any(n.endswith("_scale_inv") for n in dst)
        dequantized = 0
        for name, got in dst.items():
            where = "%s over %s, step %d" % (name, transport, step)
            x = src[name]
            if x.dtype == torch.float8_e4m3fn:
                want = fp8_values.dequantize(x, src[name + "_scale_inv"],
                                             got.dtype)
                dequantized += 1
            else:
                want = x.to(got.dtype)
            assert got.dtype == torch.bfloat16, where
            assert torch.equal(bits(got), bits(want)), where
        assert dequantized >= 10


def test_reference_quantizer_is_deepgemms_rule():
    """The test's own reference, on numbers worked by hand."""
    w = torch.zeros(130, 3)
    w[0, 0], w[1, 1], w[129, 2] = 2.0, -1.0, 0.5
    q, s = fp8_values.quantize(w)
    assert q.shape == (130, 3) and s.shape == (2, 1)
    assert s[0, 0] == torch.tensor(2.0 / 448) and s[1, 0] == torch.tensor(0.5 / 448)
    assert float(q[0, 0]) == 448.0 and float(q[1, 1]) == -224.0
    assert float(q[129, 2]) == 448.0
    assert math.isclose(float(fp8_values.dequantize(q, s, torch.float32)[1, 1]),
                        -1.0)
