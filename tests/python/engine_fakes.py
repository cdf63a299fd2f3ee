"""Stand-ins for what wex.integrations touches of vLLM 0.34.0 and SGLang
0.5.23, neither of which imports here (no GPU, no CUDA torch): a vLLM
Worker with its model_runner.model and the extension mixed in as vLLM
mixes it, the modules the integrations read coordinates from, and a
model whose named_parameters() are an engine's local tensors."""
import importlib
import pickle
import sys
import types

import torch


def module_of(tensors, tied=()):
    """An nn.Module whose named_parameters() are `tensors` (dotted names,
    as the engine's model classes name them), each a Parameter over the
    tensor itself; `tied` pairs (name, name of the parameter it shares, as
    vLLM's lm_head = model.embed_tokens)."""
    root = torch.nn.Module()

    def parent(name):
        *path, leaf = name.split(".")
        m = root
        for part in path:
            if part not in m._modules:
                m.add_module(part, torch.nn.Module())
            m = m._modules[part]
        return m, leaf

    for name, tensor in tensors.items():
        m, leaf = parent(name)
        m.register_parameter(leaf, torch.nn.Parameter(tensor,
                                                      requires_grad=False))
    for name, shared in tied:
        m, leaf = parent(name)
        m.register_parameter(leaf, root.get_parameter(shared))
    return root


class Group:
    """A GroupCoordinator's rank_in_group and world_size."""

    def __init__(self, rank, size):
        self.rank_in_group, self.world_size = rank, size


# ---- vLLM 0.34.0 ------------------------------------------------------------

class ParallelConfig:
    """vllm/config/parallel.py ParallelConfig, the fields read."""

    def __init__(self, tp=1, pp=1, dp=1, dp_rank=0, dp_index=None):
        self.tensor_parallel_size = tp
        self.pipeline_parallel_size = pp
        self.data_parallel_size = dp
        self.data_parallel_rank = dp_rank
        self.data_parallel_index = dp_rank if dp_index is None else dp_index


class VllmConfig:
    def __init__(self, parallel_config):
        self.parallel_config = parallel_config


class ModelRunner:
    """vllm/v1/worker/gpu/model_runner.py GPUModelRunner: its model."""

    def __init__(self, model):
        self.model = model

    def get_model(self):
        return self.model


class WorkerBase:
    """vllm/v1/worker/worker_base.py WorkerBase, what __init__ sets that
    the extension may meet."""

    def __init__(self, vllm_config, local_rank, rank,
                 distributed_init_method="tcp://127.0.0.1:0",
                 is_driver_worker=False):
        self.vllm_config = vllm_config
        self.parallel_config = vllm_config.parallel_config
        self.parallel_config.rank = rank
        self.local_rank = local_rank
        self.rank = rank
        self.distributed_init_method = distributed_init_method
        self.is_driver_worker = is_driver_worker
        self.device = None
        self.model_runner = None

    def init_device(self):
        pass

    def load_model(self):
        pass

    def execute_model(self, scheduler_output):
        raise NotImplementedError

    def shutdown(self):
        pass


def worker_class(extension_path):
    """A fresh Worker(WorkerBase) class with the extension mixed in as
    WorkerWrapperBase.init_worker (vllm/v1/worker/worker_base.py) does:
    resolved by its dotted name, refused when it shares an attribute with
    the Worker, appended to the Worker's bases."""
    class Worker(WorkerBase):
        pass

    module, _, name = extension_path.rpartition(".")
    extension = getattr(importlib.import_module(module), name)
    for attr in dir(extension):
        if attr.startswith("__"):
            continue
        assert not hasattr(Worker, attr), (
            "Worker class %s already has an attribute %s, which conflicts "
            "with the worker extension class %s" % (Worker, attr, extension))
    Worker.__bases__ = Worker.__bases__ + (extension,)
    return Worker


def collective_rpc(worker, method, args=(), kwargs=None):
    """One worker's part of LLM.collective_rpc: run_method
    (vllm/v1/serial_utils.py) by name; the answer crosses a process
    boundary, so it is pickled."""
    result = getattr(worker, method)(*args, **(kwargs or {}))
    return pickle.loads(pickle.dumps(result))


def vllm_modules(tp_rank, tp_size, pp_rank=0, pp_size=1):
    """vllm.distributed.parallel_state's rank functions, for sys.modules."""
    state = types.ModuleType("vllm.distributed.parallel_state")
    state.get_tensor_model_parallel_rank = lambda: tp_rank
    state.get_tensor_model_parallel_world_size = lambda: tp_size
    state.get_pp_group = lambda: Group(pp_rank, pp_size)
    return {"vllm": types.ModuleType("vllm"),
            "vllm.distributed": types.ModuleType("vllm.distributed"),
            "vllm.distributed.parallel_state": state}


# ---- SGLang 0.5.23 ----------------------------------------------------------

class Parallel:
    """srt/runtime_context.py get_parallel(): dp_rank (None without a
    data-parallel controller, and unreadable when never published),
    dp_size, attn_dp_size."""

    def __init__(self, dp_rank=None, dp_size=1, attn_dp_size=1,
                 published=True):
        self._dp_rank, self._published = dp_rank, published
        self.dp_size, self.attn_dp_size = dp_size, attn_dp_size

    @property
    def dp_rank(self):
        if not self._published:
            raise RuntimeError("parallel name 'dp_rank' has not been "
                               "written in this process.")
        return self._dp_rank


def sglang_modules(tp_rank, tp_size, pp_rank=0, pp_size=1, **parallel):
    """sglang.srt.distributed's rank functions and
    sglang.srt.runtime_context.get_parallel, for sys.modules."""
    dist = types.ModuleType("sglang.srt.distributed")
    dist.get_tensor_model_parallel_rank = lambda: tp_rank
    dist.get_tensor_model_parallel_world_size = lambda: tp_size
    dist.get_pp_group = lambda: Group(pp_rank, pp_size)
    context = types.ModuleType("sglang.srt.runtime_context")
    context.get_parallel = lambda: Parallel(**parallel)
    return {"sglang": types.ModuleType("sglang"),
            "sglang.srt": types.ModuleType("sglang.srt"),
            "sglang.srt.distributed": dist,
            "sglang.srt.runtime_context": context}


def update_weights_from_tensor(model, named_tensors, load_format):
    """One TP rank's part of Engine.update_weights_from_tensor with a
    custom loader: the tensors serialized to the rank and back
    (srt/entrypoints/engine.py), moved to its device, then
    dynamic_import(load_format)(model, named_tensors)
    (model_runner_components/weight_updater.py, srt/utils/common.py)."""
    named_tensors = [(n, t.to("cpu"))
                     for n, t in pickle.loads(pickle.dumps(named_tensors))]
    module, _, name = load_format.rpartition(".")
    loader = getattr(importlib.import_module(module), name)
    loader(model, named_tensors)


def install(modules):
    """Puts fake modules into sys.modules (a rank process's own)."""
    sys.modules.update(modules)
