"""An inference engine rank: holds the same model class, takes each
step's weights from the trainer into its live parameters, and answers a
prompt with them.

    python engine.py --rank R --rendezvous HOST:PORT --token TOKEN [--steps 5]

(run.py starts two of them beside the trainer.)"""
import argparse
import hashlib
import os

import torch
import transformers

import wex

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--job", default=os.path.join(HERE, "job.json"))
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--rendezvous", required=True)
parser.add_argument("--token", required=True)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

config = transformers.AutoConfig.from_pretrained(
    os.path.join(HERE, "tiny-qwen3.config.json"))
model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model.eval()
prompt = torch.arange(8).unsqueeze(0)

os.chdir(os.path.dirname(os.path.abspath(args.job)))
with wex.Job(args.job, "destination", args.rank, rendezvous=args.rendezvous,
             token=args.token) as job:
    job.bind(model)  # wex writes each step straight into these parameters
    for step in range(1, args.steps + 1):
        report = job.sync(step)
        with torch.no_grad():
            logits = model(input_ids=prompt).logits
            answer = model.generate(prompt, max_new_tokens=4, do_sample=False)
        digest = hashlib.sha256(logits.float().numpy().tobytes()).hexdigest()[:16]
        print("engine %d: step %d committed (%d bytes, verified %s), logits %s, "
              "answer %s" % (args.rank, report.committed_step, report.bytes,
                             report.verified, digest, answer[0, 8:].tolist()),
              flush=True)
