"""An RL loop orchestrated by Ray, as verl, OpenRLHF, NeMo-RL and slime
place theirs: a trainer actor and engine actors on a local cluster, the
rendezvous served by the driver, engines added and killed while the
trainer keeps stepping (elastic replicas: docs/design.md).

    python samples/python/ray_loop.py [--steps 6]

Each step the trainer takes an optimizer step and syncs; the engines
there sync the same step (a new engine joins with job.sync() and no
step). Every engine answers a fixed prompt after each step it committed,
and the driver checks its logits are the trainer's, bit for bit:
  step 1  engine 0
  step 2  engine 1 is added
  step 3  engine 2 is added
  step 4  engine 1 is killed (ray.kill) just before it
  step 5  engine 1 is started again
"""
import argparse
import hashlib
import os

import ray
import torch
import transformers

import wex

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "ray-sample"
REPLICAS = 3
JOB = {"model": os.path.join(HERE, "tiny-qwen3.config.json"),
       "source": {"engine": "hf"},
       "destination": {"engine": "hf", "parallel": {"dp": REPLICAS},
                       "elastic": {"min_replicas": 1}},
       "transport": "shm", "verify": "digest",
       "timeouts": {"step_seconds": 60, "join_seconds": 60}}
# step -> what the driver does before it: ("add" | "kill", engine)
EVENTS = {2: ("add", 1), 3: ("add", 2), 4: ("kill", 1), 5: ("add", 1)}


def build(seed):
    config = transformers.AutoConfig.from_pretrained(JOB["model"])
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.bfloat16)


def answer(model):
    """The logits of a fixed prompt, as a short digest."""
    with torch.no_grad():
        logits = model(input_ids=torch.arange(8).unsqueeze(0)).logits
    return hashlib.sha256(logits.float().numpy().tobytes()).hexdigest()[:16]


@ray.remote(num_cpus=0)
class Trainer:
    """Trains a tiny Qwen3 and syncs it after every optimizer step."""

    def __init__(self, rendezvous):
        torch.set_num_threads(1)
        self.model = build(0)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.data = torch.Generator().manual_seed(0)
        self.job = wex.Job(JOB, "source", 0, rendezvous=rendezvous,
                           token=TOKEN)
        self.job.bind(self.model)
        self.job.connect()  # an elastic source waits for no engine

    def step(self, step):
        vocab = self.model.config.vocab_size
        batch = torch.randint(0, vocab, (4, 32), generator=self.data)
        self.model(input_ids=batch, labels=batch).loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        r = self.job.sync(step)
        return {"step": step, "logits": answer(self.model),
                "replicas": r.replicas, "committed": r.replicas_committed,
                "joined": r.replicas_joined, "left": r.replicas_left}


@ray.remote(num_cpus=0)
class Engine:
    """Serves a tiny Qwen3 whose weights wex keeps the trainer's."""

    def __init__(self, rank, rendezvous):
        torch.set_num_threads(1)
        self.rank = rank
        self.model = build(1000 + rank)  # other weights until it joins
        self.job = wex.Job(JOB, "destination", rank, rendezvous=rendezvous,
                           token=TOKEN)
        self.job.bind(self.model)
        self.job.connect()  # connected: the next step waits for it

    def sync(self, step=None):
        """One step, or with none, the next step that takes it."""
        r = self.job.sync(step)
        return {"engine": self.rank, "step": r.step,
                "logits": answer(self.model), "mode": r.mode}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    # a local cluster; its workers inherit this process's environment
    ray.init(num_cpus=2, include_dashboard=False)
    bad = 0
    with wex.Store(token=TOKEN) as store:
        trainer = Trainer.remote(store.address)
        engines = {0: Engine.remote(0, store.address)}
        new = {0}  # engines that join at the next step
        for step in range(1, args.steps + 1):
            what, rank = EVENTS.get(step, (None, None))
            if what == "add":
                engines[rank] = Engine.remote(rank, store.address)
                new.add(rank)
            elif what == "kill":
                ray.kill(engines.pop(rank))
                print("driver: engine %d killed before step %d"
                      % (rank, step), flush=True)
            # every engine is up (connected) before the step begins
            ray.get([e.__ray_ready__.remote() for e in engines.values()])
            calls = [e.sync.remote() if r in new else e.sync.remote(step)
                     for r, e in sorted(engines.items())]
            t = ray.get(trainer.step.remote(step))
            print("trainer: step %d, %d replicas committed (%d joined, %d "
                  "left), logits %s" % (step, t["committed"], t["joined"],
                                        t["left"], t["logits"]), flush=True)
            for got in ray.get(calls):
                same = got["step"] == step and got["logits"] == t["logits"]
                bad += not same
                print("engine %d: step %d committed (%s), logits %s%s"
                      % (got["engine"], got["step"], got["mode"],
                         got["logits"], "" if same else " DIFFERS"),
                      flush=True)
            new.clear()
    ray.shutdown()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
