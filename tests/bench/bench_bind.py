"""job.bind(model) over shm, one trainer process into one engine process,
against one-thread memcpy of the same bytes in the same run.

  python tests/bench/bench_bind.py [--steps N] [--verify none,digest]
                                   [--adopt off,on]

A Qwen3-shaped transformers model scaled to 332 MB of bf16 (hidden 1024,
6 layers, a 35,072-token vocabulary, untied), built on both sides from the
same config.json. For each verify mode and each way of binding (adopt=False:
the engine's tensors bound where they live, written with process_vm_writev;
adopt on: moved into wex's shared memory at bind), the engine (this process)
binds its model, the trainer (a child process running this file) fills its
weights and syncs every step; each step's figure is the engine's bytes over
its seconds from the step's barrier to commit. memcpy is ctypes.memmove of a
buffer of the model's size, best of five passes, right before and right
after each configuration's steps (the better of the two is the limit). At
the end the engine checks every tensor holds the trainer's last step."""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers

import wex

TOKEN = "bench-bind"
TARGET = 0.9  # adopt on, verify none: x one-thread memcpy

CONFIG = dict(vocab_size=35072, hidden_size=1024, intermediate_size=3072,
              num_hidden_layers=6, num_attention_heads=16,
              num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
              max_position_embeddings=4096)


def write_config(directory):
    config = transformers.Qwen3Config(**CONFIG)
    config.architectures = ["Qwen3ForCausalLM"]
    config.save_pretrained(directory)
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        doc = json.load(f)
    doc["torch_dtype"] = "bfloat16"
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def build(config_path):
    """The model with zeroed bf16 weights: in memory, as a loaded model's
    are, without the time random initialisation takes (the trainer fills
    them every step)."""
    config = transformers.AutoConfig.from_pretrained(
        os.path.dirname(config_path))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=torch.bfloat16)
    model = model.to_empty(device="cpu")
    for t in model.state_dict().values():
        t.zero_()
    return model


def fill_value(index, step):
    """What the trainer writes into its index-th tensor at `step`."""
    return (index * 131 + step * 7) % 30011


def job_doc(config_path, verify):
    return {"model": config_path, "source": {"engine": "hf"},
            "destination": {"engine": "hf"}, "transport": "shm",
            "verify": verify,
            "timeouts": {"connect_seconds": 120, "step_seconds": 120}}


def trainer(job_path, config_path, address, job_id, steps):
    torch.set_num_threads(1)
    model = build(config_path)
    with open(job_path) as f:
        doc = json.load(f)
    with wex.Job(doc, "source", 0, rendezvous=address, token=TOKEN,
                 job_id=job_id) as job:
        job.bind(model)
        tensors = list(model.state_dict().values())
        for step in range(1, steps + 1):
            for i, t in enumerate(tensors):
                t.view(torch.int16).fill_(fill_value(i, step))
            job.sync(step)


def memcpy_gbps(nbytes, passes=5):
    """One-thread memcpy of `nbytes` (both buffers faulted in first), best
    of `passes`, in GB/s."""
    src = torch.ones(nbytes, dtype=torch.uint8)
    dst = torch.zeros(nbytes, dtype=torch.uint8)
    ctypes.memmove(dst.data_ptr(), src.data_ptr(), nbytes)  # faults dst in
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        ctypes.memmove(dst.data_ptr(), src.data_ptr(), nbytes)
        best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e9


def engine(config_path, verify, adopt, steps, tmp):
    """One configuration: the trainer child and this process's engine.
    Returns (per-step GB/s, memcpy GB/s, bind seconds, tensors adopted)."""
    model = build(config_path)
    nbytes = sum(t.numel() * t.element_size()
                 for t in model.state_dict().values())
    job_id = "bench-bind-%s-%s" % (verify, "on" if adopt else "off")
    doc = job_doc(config_path, verify)
    job_path = os.path.join(tmp, job_id + ".json")
    with open(job_path, "w") as f:
        json.dump(doc, f)
    memcpy = [memcpy_gbps(nbytes)]
    with wex.Store(token=TOKEN) as store:
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--trainer", job_path,
             config_path, store.address, job_id, str(steps)])
        try:
            with wex.Job(doc, "destination", 0, rendezvous=store.address,
                         token=TOKEN, job_id=job_id) as job:
                t0 = time.perf_counter()
                job.bind(model, adopt=None if adopt else False)
                bind_seconds = time.perf_counter() - t0
                adopted = len(job.adopted)
                figures = []
                for step in range(1, steps + 1):
                    report = job.sync(step)
                    figures.append(report.bytes / report.seconds / 1e9)
                    print("  step %d: %.2f GB/s (%d bytes in %.4f s)"
                          % (step, figures[-1], report.bytes, report.seconds),
                          flush=True)
                for i, t in enumerate(model.state_dict().values()):
                    want = fill_value(i, steps)
                    if not bool((t.view(torch.int16) == want).all()):
                        sys.exit("bench_bind: the engine's tensor %d does not "
                                 "hold the trainer's step %d" % (i, steps))
        except BaseException:
            child.kill()
            child.wait()
            raise
        if child.wait(timeout=300) != 0:
            sys.exit("bench_bind: the trainer failed (exit %d)"
                     % child.returncode)
    memcpy.append(memcpy_gbps(nbytes))
    return figures, memcpy, bind_seconds, adopted, nbytes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--verify", default="none,digest")
    parser.add_argument("--adopt", default="off,on")
    args = parser.parse_args()
    torch.set_num_threads(1)
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        config_path = write_config(tmp)
        for verify in args.verify.split(","):
            for adopt in args.adopt.split(","):
                print("== verify %s, adopt %s" % (verify, adopt), flush=True)
                figures, memcpy, bind_s, adopted, nbytes = engine(
                    config_path, verify, adopt == "on", args.steps, tmp)
                limit = max(memcpy)
                median = statistics.median(figures)
                print("  %.1f MB, %d tensors adopted, bind %.3f s; memcpy "
                      "(one thread, best of 5) %.2f GB/s before, %.2f after"
                      % (nbytes / 1e6, adopted, bind_s, memcpy[0], memcpy[1]))
                line = ("-- verify %s, adopt %s: median step %.2f GB/s, %.2f x"
                        " memcpy (steps %s x)" % (
                            verify, adopt, median, median / limit,
                            " ".join("%.2f" % (f / limit) for f in figures)))
                if verify == "none" and adopt == "on":
                    line += " (target >= %.1f: %s)" % (
                        TARGET, "met" if median / limit >= TARGET else
                        "NOT MET")
                print(line, flush=True)
                summary.append(line)
    print("\n".join(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--trainer":
        trainer(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5],
                int(sys.argv[6]))
    else:
        main()
