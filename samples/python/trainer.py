"""A trainer rank: trains a small Qwen3 and, after every optimizer step,
syncs its new weights into every engine of the job.

    python trainer.py --rendezvous HOST:PORT --token TOKEN [--steps 5]

(run.py starts it beside two engines.)"""
import argparse
import hashlib
import os

import torch
import transformers

import wex

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--job", default=os.path.join(HERE, "job.json"))
parser.add_argument("--rendezvous", required=True)
parser.add_argument("--token", required=True)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

config = transformers.AutoConfig.from_pretrained(
    os.path.join(HERE, "tiny-qwen3.config.json"))
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.Generator().manual_seed(0)
prompt = torch.arange(8).unsqueeze(0)  # the engines answer the same one

# The job's "model" is relative to the job file: open it from there.
os.chdir(os.path.dirname(os.path.abspath(args.job)))
with wex.Job(args.job, "source", 0, rendezvous=args.rendezvous,
             token=args.token) as job:
    job.bind(model)  # the weights stay where they are: no copy
    for step in range(1, args.steps + 1):
        batch = torch.randint(0, config.vocab_size, (4, 64), generator=data)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        report = job.sync(step)  # every engine now holds this step's weights
        with torch.no_grad():
            logits = model(input_ids=prompt).logits
        digest = hashlib.sha256(logits.float().numpy().tobytes()).hexdigest()[:16]
        print("trainer: step %d, loss %.4f, sent %.1f MB in %.1f ms, logits %s"
              % (step, loss.item(), report.bytes / 1e6, report.seconds * 1e3,
                 digest), flush=True)
