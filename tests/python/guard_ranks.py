"""Scenarios of test_job_guards.py, each run as its own process so that a
crash in libwex (a use-after-free, a SIGSEGV) fails the test instead of
killing pytest: python guard_ranks.py SCENARIO MODEL_CONFIG [ARGS...].
Each prints "RESULT <json>" on success; anything else is a failure."""
import json
import signal
import sys
import threading
import time

import torch

import wex

TOKEN = "guard-test"


def job_dict(config, step_seconds=60):
    return {"model": config, "source": {"engine": "hf"},
            "destination": {"engine": "hf"}, "transport": "shm",
            "timeouts": {"connect_seconds": 60,
                         "step_seconds": step_seconds}}


def fill(tensors, step):
    for i, t in enumerate(tensors.values()):
        t.view(torch.uint8).fill_((i + step) % 251)


def holds(tensors, step):
    return all(bool((t.view(torch.uint8) == (i + step) % 251).all())
               for i, t in enumerate(tensors.values()))


def source_thread(job, address, steps, delay=0.0, errors=None):
    """A source rank in a thread: syncs `steps` after `delay` seconds."""
    def run():
        try:
            with wex.Job(job, "source", 0, rendezvous=address,
                         token=TOKEN) as src:
                tensors = src.allocate()
                time.sleep(delay)
                for step in steps:
                    fill(tensors, step)
                    src.sync(step)
        except Exception as e:
            if errors is not None:
                errors.append(repr(e))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def resize(config):
    """A destination binds its tensors, commits step 1, then resize_s one
    (its storage reallocated): sync(2) must be refused, naming it."""
    job = job_dict(config, step_seconds=5)
    with wex.Store(token=TOKEN) as store:
        src = source_thread(job, store.address, [1, 2])
        dst = wex.Job(job, "destination", 0, rendezvous=store.address,
                      token=TOKEN)
        tensors = {s.name: torch.zeros(s.shape, dtype=s.dtype)
                   for s in dst.tensors}
        # bound where they live (adopted ones cannot be resized at all)
        dst.bind(tensors, adopt=False)
        dst.sync(1)
        first_ok = holds(tensors, 1)
        name = next(iter(tensors))
        tensors[name].resize_(tensors[name].numel() * 64)
        try:
            dst.sync(2)
            message = None
        except wex.WexError as e:
            message = str(e)
        try:
            dst.save("/nonexistent-wex-guard-test/out")
            save_message = None
        except wex.WexError as e:
            save_message = str(e)
        dst.close()
        # The source's sync(2) fails once the destination is gone; wait
        # for it, so no thread is inside libwex while the process exits.
        src.join(30)
    print("RESULT " + json.dumps({"first_ok": first_ok, "name": name,
                                  "message": message,
                                  "save_message": save_message}))


def close_during_sync(config):
    """One thread syncs a destination (waiting for its source, which comes
    1.5 s later); another calls close() meanwhile: close returns only after
    the sync did, and a later call is refused."""
    job = job_dict(config)
    times, out = {}, {}
    with wex.Store(token=TOKEN) as store:
        dst = wex.Job(job, "destination", 0, rendezvous=store.address,
                      token=TOKEN)
        # our own memory: it outlives close(), unlike allocate()'s
        tensors = {s.name: torch.zeros(s.shape, dtype=s.dtype)
                   for s in dst.tensors}
        dst.bind(tensors)

        def syncing():
            times["sync_start"] = time.monotonic()
            try:
                out["report"] = dst.sync(1).committed_step
            except Exception as e:
                out["sync_error"] = repr(e)
            times["sync_end"] = time.monotonic()

        def closing():
            time.sleep(0.5)
            times["close_start"] = time.monotonic()
            dst.close()
            times["close_end"] = time.monotonic()

        threads = [threading.Thread(target=syncing),
                   threading.Thread(target=closing)]
        for t in threads:
            t.start()
        source_thread(job, store.address, [1], delay=1.5)
        for t in threads:
            t.join(60)
        out["held"] = holds(tensors, 1) if "report" in out else None
        try:
            dst.sync(2)
        except wex.WexError as e:
            out["after_close"] = str(e)
    out["close_after_sync"] = times["close_end"] >= times["sync_end"]
    out["close_started_during_sync"] = (
        times["sync_start"] < times["close_start"] < times["sync_end"])
    print("RESULT " + json.dumps(out))


def two_threads(config):
    """Two threads sync one destination job at once (steps 1 and 2): they
    take turns, both commit, and the tensors hold step 2."""
    job = job_dict(config)
    out, errors = {}, []
    with wex.Store(token=TOKEN) as store:
        with wex.Job(job, "destination", 0, rendezvous=store.address,
                     token=TOKEN) as dst:
            tensors = dst.allocate()

            def syncing(step):
                try:
                    out[str(step)] = dst.sync(step).committed_step
                except Exception as e:
                    errors.append(repr(e))

            a = threading.Thread(target=syncing, args=(1,))
            a.start()
            time.sleep(0.3)  # step 1 takes the lock first
            b = threading.Thread(target=syncing, args=(2,))
            b.start()
            source_thread(job, store.address, [1, 2], delay=1.0,
                          errors=errors)
            a.join(60)
            b.join(60)
            out["committed"] = dst.committed_step
            out["held"] = holds(tensors, 2)
    out["errors"] = errors
    print("RESULT " + json.dumps(out))


def dirty_destination(config, address):
    """A destination of the dirty test: commits step 1, fails step 2 (its
    source is killed mid-step), then commits step 3 from a replacement."""
    job = job_dict(config, step_seconds=20)
    out = {}
    with wex.Job(job, "destination", 0, rendezvous=address,
                 token=TOKEN) as dst:
        dst.allocate()
        dst.sync(1)
        out["dirty_after_1"] = dst.dirty
        print("COMMITTED 1", flush=True)
        try:
            dst.sync(2)
            out["step2_error"] = None
        except wex.WexError as e:
            out["step2_error"] = str(e)
        out["dirty_after_failure"] = dst.dirty
        out["committed_after_failure"] = dst.committed_step
        try:
            dst.save(sys.argv[4])
            out["save_error"] = None
        except wex.WexError as e:
            out["save_error"] = str(e)
        print("FAILED 2", flush=True)
        # A kill that landed after step 2 committed is news at step 3's
        # barrier, which then fails: that attempt missed the writes.
        try:
            dst.sync(3)
            out["step3_error"] = None
        except wex.WexError as e:
            out["step3_error"] = str(e)
        out["dirty_after_3"] = dst.dirty
        out["committed_after_3"] = dst.committed_step
    print("RESULT " + json.dumps(out), flush=True)


def dirty_source(config, address, steps):
    """A source of the dirty test: syncs each step of `steps` (comma
    separated), announcing each before it starts."""
    job = job_dict(config, step_seconds=20)
    with wex.Job(job, "source", 0, rendezvous=address, token=TOKEN) as src:
        tensors = src.allocate()
        for step in (int(s) for s in steps.split(",")):
            fill(tensors, step)
            print("SYNCING %d" % step, flush=True)
            start = time.monotonic()
            report = src.sync(step)
            print("SYNCED %d %.6f %.6f" % (step, time.monotonic() - start,
                                           report.seconds), flush=True)
    print("RESULT {}", flush=True)


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(300)
    scenario = {"resize": resize, "close": close_during_sync,
                "turns": two_threads, "dirty-destination": dirty_destination,
                "dirty-source": dirty_source}[sys.argv[1]]
    scenario(*sys.argv[2:4] if sys.argv[1] == "dirty-destination"
             else sys.argv[2:])
