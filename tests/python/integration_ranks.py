"""One process of test_integrations:

  python integration_ranks.py trainer|vllm|sglang RANK JOB.json OUT.pt
                              --token T --job-id ID [--steps N]

JOB.json is [job text, config.json path, rendezvous address]. The trainer
is the job's one hf source rank: it builds the model (seed 0), and every
step moves each parameter in place by a seeded amount and syncs, saving
its parameters under the checkpoint's names. A `vllm` process is one TP
worker of a vLLM server, shaped like vLLM 0.34.0's (engine_fakes): its
model_runner.model holds the zeroed tensors vllm_reference says its rank
holds, under vLLM's names; WexWorkerExtension is mixed into its Worker
class as vLLM mixes it, and the process drives it as collective_rpc
would, with its coordinates given explicitly. An `sglang` process is one
TP rank of an SGLang 0.5.23 server (its coordinates read from stand-ins
for sglang's modules): the commands reach wex's custom loader as
update_weights_from_tensor carries them. Each worker saves, every step,
its sync report and a copy of its tensors."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_fakes  # noqa: E402
import families  # noqa: E402
import reshard_models  # noqa: E402
import vllm_reference  # noqa: E402
import wex  # noqa: E402

TP = 2
EXTENSION = "wex.integrations.vllm.WexWorkerExtension"


def train(args, job_text, config_path, address):
    model = families.build(config_path, 0)
    steps = {}
    with wex.Job(job_text, "source", args.rank, rendezvous=address,
                 token=args.token, job_id=args.job_id) as job:
        job.bind(model)
        for step in range(1, args.steps + 1):
            g = torch.Generator().manual_seed(step)
            with torch.no_grad():
                for p in model.parameters():  # in place: the bound memory
                    p.add_(torch.randn(p.shape, generator=g).to(p.dtype))
            report = job.sync(step)
            steps[step] = {
                "report": report._asdict(),
                "params": {k: v.detach().clone() for k, v in
                           families.checkpoint_state(
                               model.state_dict()).items()}}
    return steps


def tensors_of(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def vllm_worker(args, job_text, config, address):
    model = engine_fakes.module_of(vllm_reference.zeros(config, TP, args.rank))
    worker = engine_fakes.worker_class(EXTENSION)(
        engine_fakes.VllmConfig(engine_fakes.ParallelConfig(tp=TP)),
        local_rank=args.rank, rank=args.rank)
    worker.model_runner = engine_fakes.ModelRunner(model)

    def rpc(method, *rpc_args, **kwargs):
        return engine_fakes.collective_rpc(worker, method, rpc_args, kwargs)

    out = {"opened": rpc("wex_open", job_text, address, args.token,
                         job_id=args.job_id, tp_rank=args.rank, pp_rank=0,
                         dp_rank=0),
           "steps": {}}
    for step in range(1, args.steps + 1):
        out["steps"][step] = {"report": rpc("wex_sync", step),
                              "tensors": tensors_of(model)}
    rpc("wex_close")
    return out


def sglang_worker(args, job_text, config, address):
    engine_fakes.install(engine_fakes.sglang_modules(args.rank, TP))
    from wex.integrations import sglang as wex_sglang

    model = engine_fakes.module_of(vllm_reference.zeros(config, TP, args.rank))

    def send(command):
        engine_fakes.update_weights_from_tensor(model, command,
                                                wex_sglang.LOAD_FORMAT)

    send(wex_sglang.open_request(job_text, address, args.token,
                                 job_id=args.job_id))
    out = {"opened": dict(wex_sglang.wex_state(model)), "steps": {}}
    for step in range(1, args.steps + 1):
        send(wex_sglang.sync_request(step))
        state = wex_sglang.wex_state(model)
        out["steps"][step] = {"report": state["report"],
                              "error": state["error"],
                              "tensors": tensors_of(model)}
    send(wex_sglang.close_request())
    out["closed"] = wex_sglang.wex_state(model) is None
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["trainer", "vllm", "sglang"])
    parser.add_argument("rank", type=int)
    parser.add_argument("job", help="JSON: [job text, config, address]")
    parser.add_argument("out")
    parser.add_argument("--token", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(args.job) as f:
        job_text, config_path, address = json.load(f)
    if args.role == "trainer":
        out = train(args, job_text, config_path, address)
    else:
        run = vllm_worker if args.role == "vllm" else sglang_worker
        out = run(args, job_text, reshard_models.read_config(config_path),
                  address)
    torch.save(out, args.out)


if __name__ == "__main__":
    main()
