"""What wex.Job guards against: one job used
from two threads, steps outside [1, 2**63), a bound tensor resized under
wex, and a destination left dirty by a failed step. The scenarios that
could crash libwex run in their own processes (guard_ranks.py)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import wex
from conftest import HERE

TOKEN = "guard-test"


@pytest.fixture
def llama(family_configs):
    return family_configs["llama"]


def scenario(*args, timeout=240):
    """Runs guard_ranks.py SCENARIO ...; its RESULT, or the test fails
    with its exit status (a signal: libwex crashed) and output."""
    p = subprocess.run([sys.executable, os.path.join(HERE, "guard_ranks.py")]
                       + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    results = [line[len("RESULT "):] for line in p.stdout.splitlines()
               if line.startswith("RESULT ")]
    if p.returncode != 0 or not results:
        pytest.fail("guard_ranks.py %s exit %d:\n%s"
                    % (args[0], p.returncode, p.stdout[-4000:]))
    return json.loads(results[-1])


# ---- steps -------------------------------------------------------------------

@pytest.mark.parametrize("step", [-1, 0, 2 ** 63, 2 ** 64, 2 ** 64 + 1, 1.5,
                                  True, "1"])
def test_steps_outside_1_to_2_pow_63_are_refused(llama, step):
    with wex.Job({"model": llama, "source": {"engine": "hf"},
                  "destination": {"engine": "hf"}, "transport": "shm"},
                 "source", 0, token=TOKEN) as job:
        with pytest.raises(wex.WexError,
                           match=r"step must be an integer in \[1, 2\*\*63\)"
                           ) as e:
            job.sync(step)
        assert e.value.status == "INVALID"
        assert job.committed_step == 0


def test_a_source_cannot_join(llama):
    """sync() without a step joins, which only a destination does."""
    with wex.Job({"model": llama, "source": {"engine": "hf"},
                  "destination": {"engine": "hf"}, "transport": "shm"},
                 "source", 0, token=TOKEN) as job:
        with pytest.raises(wex.WexError, match="only a destination joins"):
            job.sync()
        with pytest.raises(wex.WexError, match="only a destination joins"):
            job.join()


# ---- bound tensors that move ---------------------------------------------------

def test_resized_bound_tensor_is_refused_at_sync(llama):
    r = scenario("resize", llama)
    assert r["first_ok"]
    name = r["name"]
    assert r["message"] is not None, "sync after resize_ was not refused"
    assert r["message"].startswith("INVALID: sync: tensor %s was resized or "
                                   "moved since bind (data_ptr 0x" % name)
    assert "bind tensors whose storage stays put" in r["message"]
    assert r["save_message"] and ("save: tensor %s was resized" % name
                                  in r["save_message"])


def test_shrunk_or_strided_bound_tensor_is_refused_without_reaching_libwex(
        llama):
    # no peer and no rendezvous: a sync that reached libwex would fail
    # elsewhere (or wait); the guard refuses it first
    with wex.Job({"model": llama, "source": {"engine": "hf"},
                  "destination": {"engine": "hf"}, "transport": "shm"},
                 "source", 0, token=TOKEN) as job:
        tensors = {s.name: torch.zeros(s.shape, dtype=s.dtype)
                   for s in job.tensors}
        job.bind(tensors)
        name, tensor = next(iter(tensors.items()))
        nbytes = tensor.numel() * tensor.element_size()
        tensor.resize_(0)
        with pytest.raises(wex.WexError, match=r"sync: tensor %s was resized "
                           r"or moved since bind \(data_ptr 0x[0-9a-f]+ -> "
                           r"0x[0-9a-f]+, %d -> 0 bytes\)"
                           % (name.replace(".", r"\."), nbytes)):
            job.sync(1)
        with pytest.raises(wex.WexError, match="save: tensor %s was resized"
                           % name.replace(".", r"\.")):
            job.save("/nonexistent-wex-guard-test/out")


# ---- one job, two threads --------------------------------------------------------

def test_close_waits_for_a_running_sync(llama):
    r = scenario("close", llama)
    assert "sync_error" not in r, r
    assert r["report"] == 1 and r["held"]
    assert r["close_started_during_sync"], r
    assert r["close_after_sync"], r
    assert "the job is closed" in r["after_close"]


def test_two_threads_syncing_one_job_take_turns(llama):
    r = scenario("turns", llama)
    assert r["errors"] == [], r["errors"]
    assert r["1"] == 1 and r["2"] == 2
    assert r["committed"] == 2 and r["held"]


# ---- dirty -------------------------------------------------------------------------

def _has_job_dirty():
    return hasattr(wex._lib.lib(), "wex_job_dirty")


def _big_llama(directory):
    """A llama of ~100 M bf16 elements, so that a step takes long enough
    for its source to be killed in the middle of it."""
    import transformers
    config = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=1024, intermediate_size=2048,
        num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=8,
        tie_word_embeddings=False, torch_dtype="bfloat16",
        architectures=["LlamaForCausalLM"])
    config.save_pretrained(directory)
    return os.path.join(directory, "config.json")


def _rank(*args):
    return subprocess.Popen([sys.executable, os.path.join(HERE,
                             "guard_ranks.py")] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _wait_for(proc, line, timeout=120):
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = proc.stdout.readline()
        if not got:
            break
        seen.append(got)
        if got.startswith(line):
            return seen
    pytest.fail("no %r from the rank:\n%s" % (line, "".join(seen)[-4000:]))


def _kill_source_into_step_2(tmp_path, config, delay):
    """Runs the dirty scenario once, the source killed `delay` seconds
    after it said it syncs step 2; the destination's RESULT."""
    saved = tmp_path / ("saved-%g" % delay)
    with wex.Store(token=TOKEN) as store:
        dst = _rank("dirty-destination", config, store.address, str(saved))
        src = _rank("dirty-source", config, store.address, "1,2")
        try:
            _wait_for(dst, "COMMITTED 1")
            _wait_for(src, "SYNCING 2")
            time.sleep(delay)
            src.send_signal(signal.SIGKILL)
            src.wait(30)
            replacement = _rank("dirty-source", config, store.address, "3")
            out, _ = replacement.communicate(timeout=120)
            rest, _ = dst.communicate(timeout=120)
        finally:
            for p in (dst, src):
                if p.poll() is None:
                    p.kill()
    assert dst.returncode == 0, rest
    r = json.loads([line for line in rest.splitlines()
                    if line.startswith("RESULT ")][-1][len("RESULT "):])
    r["saved_something"] = saved.exists() and any(saved.iterdir())
    r["replacement_ok"] = replacement.returncode == 0
    r["replacement_output"] = out
    return r


def test_failed_step_marks_destination_dirty(tmp_path):
    config = _big_llama(str(tmp_path / "model"))
    # A kill lands in step 2's writes only if timed well: tried at several
    # points until one does (a kill before the barrier fails the step
    # with nothing written, one after it lets the step commit).
    # A kill after step 2 committed missed it: step 3 then commits, or
    # fails naming the source if the death is news at its barrier; such
    # an attempt is tried again.
    for delay in (0.05, 0.02, 0.1, 0.005, 0.03, 0.2, 0.07, 0.4):
        r = _kill_source_into_step_2(tmp_path, config, delay)
        assert r["dirty_after_1"] is False
        if r["step2_error"] is None:
            assert r["committed_after_failure"] == 2, r
            assert (r["committed_after_3"] == 3 if r["step3_error"] is None
                    else "source/0" in r["step3_error"]), r
            continue
        assert r["step3_error"] is None and r["replacement_ok"], r
        assert r["dirty_after_3"] is False and r["committed_after_3"] == 3
        if r["dirty_after_failure"]:
            break
    else:
        pytest.fail("no kill landed inside step 2's writes")
    assert r["committed_after_failure"] == 1
    assert r["save_error"] and "dirty" in r["save_error"]
    assert not r["saved_something"]


def test_dirty_needs_a_libwex_that_has_it(llama):
    # against an older libwex the package still imports and Job works;
    # only .dirty says what is missing
    with wex.Job({"model": llama, "source": {"engine": "hf"},
                  "destination": {"engine": "hf"}, "transport": "shm"},
                 "source", 0, token=TOKEN) as job:
        if _has_job_dirty():
            assert job.dirty is False  # always False on a source
        else:
            with pytest.raises(ImportError, match="wex_job_dirty"):
                job.dirty
