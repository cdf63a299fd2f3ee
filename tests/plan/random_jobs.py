#!/usr/bin/python3
"""Seeded random jobs for `wex plan`, each checked by check_plan.py.

  random_jobs.py [--seed 1] [--count 25] [--wex WEX] [--models DIR]
                 [--max-ranks 16] [--max-ops 40000] [--policy-options JSON]
                 [--keep DIR]

Each job pairs two engines among those `wex plugins` lists as loaded, a
small model from the models directory, random parallel configs (drawn again
until `wex layout` accepts them and they have at most --max-ranks ranks),
and at most --max-ops operations in its plan, a random topology
(colocated or disaggregated, 2, 4 or 8 GPUs per host,
sometimes explicit hosts), sometimes policy options and sometimes a
destination-level copy of the model config. A failing job's file is
printed in full, so it can be replayed with check_plan.py.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_plan  # noqa: E402

MODELS = ["Qwen3-0.6B", "Llama-3.2-1B", "Qwen2.5-7B-Instruct", "Qwen3-8B",
          "Qwen3-30B-A3B", "Mixtral-8x7B"]


def model_info(path):
    with open(path) as f:
        c = json.load(f)
    return {"layers": c["num_hidden_layers"],
            "experts": c.get("num_experts") or c.get("num_local_experts") or 0}


def split(rnd, total, parts):
    """`total` as `parts` positive counts."""
    cuts = sorted(rnd.sample(range(1, total), parts - 1))
    return [b - a for a, b in zip([0] + cuts, cuts + [total])]


def draw_parallel(rnd, engine, info):
    """A plausible parallel config and engine options (the engine may still
    refuse it)."""
    c = rnd.choice
    moe = info["experts"] > 0
    p, options = {}, {}
    if engine == "hf":
        return p, options
    if engine == "fsdp":
        return {"dp": c([1, 2, 3, 4, 8])}, options
    p["tp"] = c([1, 2, 2, 4, 8])
    p["pp"] = c([1, 1, 2, 3, 4])
    p["dp"] = c([1, 1, 2, 4])
    if engine == "megatron":
        if moe:
            p["ep"] = c([1, 2, 4, 8])
            p["etp"] = c([1, p["tp"]])
        if rnd.random() < 0.3:
            options["make_vocab_size_divisible_by"] = c([1, 64, 128, 256])
        if moe and rnd.random() < 0.5:
            options["moe_grouped_gemm"] = c([True, False])
    elif engine == "vllm":
        if moe:
            p["ep"] = c([1, p["tp"], p["tp"] * p["dp"]])
    elif engine == "sglang":
        if moe:
            p["ep"] = c([1, p["tp"]])
        if rnd.random() < 0.3:
            p["attn_dp"] = c([d for d in (1, 2, 4, 8) if p["tp"] % d == 0])
    if p["pp"] > 1 and rnd.random() < 0.4:
        if rnd.random() < 0.5:
            p["pp_layers"] = split(rnd, info["layers"], p["pp"])
        else:
            per = info["layers"] // p["pp"]
            p["first_stage_layers"] = max(1, per - rnd.randint(0, 2))
            p["last_stage_layers"] = max(1, per - rnd.randint(0, 2))
    # Drop the defaults now and then, as people write them.
    for key in ("tp", "pp", "dp", "ep"):
        if p.get(key) == 1 and rnd.random() < 0.5:
            del p[key]
    return p, options


def side_ok(wex, model, engine, parallel, options, max_ranks):
    """The rank count when `wex layout` accepts the config, else None."""
    side = {"engine": engine, "parallel": parallel}
    if options:
        side["options"] = options
    job = {"model": model, "source": side}
    try:
        n = check_plan.side_ranks(wex, job, os.path.join(os.sep, "job.json"), "source")
    except check_plan.WexError:
        return None
    return n if n <= max_ranks else None


def draw_side(rnd, wex, engines, model, info, max_ranks):
    for _ in range(200):
        engine = rnd.choice(engines)
        parallel, options = draw_parallel(rnd, engine, info)
        n = side_ok(wex, model, engine, parallel, options, max_ranks)
        if n is not None:
            side = {"engine": engine}
            if parallel or rnd.random() < 0.5:
                side["parallel"] = parallel
            if options:
                side["options"] = options
            return side, n
    raise RuntimeError("no %s config accepted in 200 draws" % model)


def draw_topology(rnd, src_ranks, dst_ranks):
    t = {"placement": rnd.choice(["colocated", "disaggregated"]),
         "gpus_per_host": rnd.choice([2, 4, 8])}
    if rnd.random() < 0.5:
        t["nic_gb_per_s"] = rnd.choice([12.5, 25, 50, 100, 400])
        t["intra_host_gb_per_s"] = rnd.choice([100, 400, 900])
    if rnd.random() < 0.3:
        hosts = [{"name": "h%d" % h, "source": [], "destination": []}
                 for h in range(rnd.randint(1, 4))]
        for side, n in (("source", src_ranks), ("destination", dst_ranks)):
            for r in rnd.sample(range(n), n):
                rnd.choice(hosts)[side].append(r)
        t["hosts"] = hosts
    return t


def draw_policy(rnd):
    x = rnd.random()
    if x < 0.5:
        return None
    if x < 0.7:
        return "balanced"
    opts = {}
    if rnd.random() < 0.5:
        opts["prefer_local"] = rnd.choice([True, False])
    if rnd.random() < 0.5:
        opts["split_min_bytes"] = rnd.choice([1, 4096, 1 << 20, 1 << 26])
    if rnd.random() < 0.5:
        opts["coalesce"] = rnd.choice([True, False])
    return {"name": "balanced", "options": opts}


def plan_size(wex, path):
    """The global plan's operation count; None when wex plan fails (the
    checker will report how)."""
    try:
        return json.loads(check_plan.run_wex(wex, ["plan", path, "--json"]))["operations"]
    except check_plan.WexError:
        return None


def force_policy(path, job, options):
    """Merges `options` into the job's policy and rewrites its file."""
    policy = job.get("policy", "balanced")
    if isinstance(policy, str):
        policy = {"name": policy}
    policy.setdefault("options", {}).update(options)
    job["policy"] = policy
    with open(path, "w") as f:
        json.dump(job, f, indent=1)


def draw_job(rnd, wex, engines, models_dir, tmp, index, max_ranks, max_ops,
             policy_options=None):
    """A job small enough to check quickly: drawn again while its plan has
    more than max_ops operations."""
    for attempt in range(20):
        path, job = draw_one(rnd, wex, engines, models_dir,
                             os.path.join(tmp, "job%03d-%d" % (index, attempt)),
                             index, max_ranks)
        if policy_options:
            force_policy(path, job, policy_options)
        ops = plan_size(wex, path)
        if ops is None or ops <= max_ops:
            return path, job
    return path, job


def draw_one(rnd, wex, engines, models_dir, job_dir, index, max_ranks):
    name = rnd.choice(MODELS)
    model = os.path.join(models_dir, name + ".config.json")
    info = model_info(model)
    src, src_ranks = draw_side(rnd, wex, engines, model, info, max_ranks)
    dst, dst_ranks = draw_side(rnd, wex, engines, model, info, max_ranks)
    shutil.rmtree(job_dir, ignore_errors=True)  # a --keep directory reused
    os.makedirs(job_dir)
    job = {"name": "random job %d: %s" % (index, name),
           "model": os.path.relpath(model, job_dir),
           "source": src, "destination": dst, "transport": "shm",
           "topology": draw_topology(rnd, src_ranks, dst_ranks)}
    if rnd.random() < 0.15:  # the destination's own (identical) config
        copy = os.path.join(job_dir, "dst-model", "config.json")
        os.makedirs(os.path.dirname(copy))
        shutil.copyfile(model, copy)
        dst["model"] = os.path.join("dst-model", "config.json")
    policy = draw_policy(rnd)
    if policy is not None:
        job["policy"] = policy
    path = os.path.join(job_dir, "job.json")
    with open(path, "w") as f:
        json.dump(job, f, indent=1)
    return path, job


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=25)
    ap.add_argument("--wex", default=check_plan.default_wex())
    ap.add_argument("--models", default=os.path.join(check_plan.ROOT, "samples", "models"))
    ap.add_argument("--max-ranks", type=int, default=16,
                    help="ranks per side at most (default 16)")
    ap.add_argument("--max-ops", type=int, default=40000,
                    help="redraw jobs whose plan has more operations (default 40000)")
    ap.add_argument("--policy-options", type=json.loads, metavar="JSON",
                    help="options merged into every job's policy, e.g. "
                         "'{\"prefer_local\": false}'")
    ap.add_argument("--keep", help="write the jobs here and keep them")
    a = ap.parse_args()
    t0 = time.monotonic()
    engines = check_plan.loaded_engines(a.wex)
    if not engines:
        print("no engine plugins loaded")
        return 1
    rnd = random.Random(a.seed)
    tmp = a.keep or tempfile.mkdtemp(prefix="wex-random-jobs-")
    os.makedirs(tmp, exist_ok=True)
    failed = 0
    try:
        print("seed %d, %d jobs, engines %s" % (a.seed, a.count, ", ".join(engines)))
        for i in range(a.count):
            path, job = draw_job(rnd, a.wex, engines, a.models, tmp, i, a.max_ranks,
                                 a.max_ops, a.policy_options)
            status, line = check_plan.check_job(a.wex, path)
            print("[%d] %s -> %s %s" % (i, describe_side(job["source"]),
                                        describe_side(job["destination"]), line),
                  flush=True)
            if status != "OK":
                failed += 1
                print("    job: " + replayable(job, path), flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d of %d jobs failed, %.1f s" % (failed, a.count, time.monotonic() - t0))
    return 1 if failed else 0


def replayable(job, path):
    """The job as JSON with its model paths absolute, to replay anywhere
    (a side's own model is a copy of the job's)."""
    job = json.loads(json.dumps(job))
    base = os.path.dirname(os.path.abspath(path))
    job["model"] = os.path.normpath(os.path.join(base, job["model"]))
    for side in ("source", "destination"):
        if "model" in job[side]:
            job[side]["model"] = job["model"]
    return json.dumps(job, separators=(",", ":"))


def describe_side(side):
    p = side.get("parallel") or {}
    text = side["engine"] + "(" + ",".join(
        "%s=%s" % (k, ":".join(map(str, v)) if isinstance(v, list) else v)
        for k, v in p.items()) + ")"
    if side.get("options"):
        text += json.dumps(side["options"], separators=(",", ":"))
    return text


if __name__ == "__main__":
    sys.exit(main())
