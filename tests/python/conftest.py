"""Shared by the Python tests: where the tests and samples are, the tiny
models of every family, and running ranks as their own processes."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def family_configs(tmp_path_factory):
    """family -> the path of its tiny config.json."""
    import families
    base = tmp_path_factory.mktemp("families")
    return {f: families.write_config(f, str(base / f)) for f in families.FAMILIES}


def hf_job(config_path, transport, replicas=2, verify="digest"):
    """A job: one hf trainer rank into `replicas` hf engine ranks."""
    import families
    modules = {"modules": families.MODULES}
    job = {"model": config_path,
           "source": {"engine": "hf", "options": modules},
           "destination": {"engine": "hf", "parallel": {"dp": replicas},
                           "options": modules},
           "transport": transport, "verify": verify,
           "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
    if transport == "ucx":
        job["topology"] = {"placement": "disaggregated", "gpus_per_host": 1}
    return job


def run_ranks(script, ranks, args, timeout=600):
    """Starts one process per (role, rank), waits for all, and fails the
    test with their output when any fails."""
    procs = []
    for role, rank, out in ranks:
        cmd = [sys.executable, os.path.join(HERE, script), role, str(rank)]
        cmd += [a.format(out=out) for a in args]
        procs.append((role, rank, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    failed = []
    for role, rank, p in procs:
        try:
            output, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            output, _ = p.communicate()
            failed.append("%s %d timed out:\n%s" % (role, rank, output))
            continue
        if p.returncode != 0:
            failed.append("%s %d exit %d:\n%s" % (role, rank, p.returncode,
                                                 output[-4000:]))
    if failed:
        for _, _, p in procs:
            if p.poll() is None:
                p.kill()
        pytest.fail("\n".join(failed))


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return str(path)
