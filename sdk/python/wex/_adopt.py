"""Adopting a destination's host tensors into memory wex allocates.

A transport may write memory it allocated faster than the application's:
shm maps the destination's allocated memory (sealed memfds) into its
sources and copies into it at memory speed, while memory the application
allocated is written with process_vm_writev. Adopting a tensor allocates
its bytes with wex_job_alloc, copies the tensor in once, and swaps the
storage of every tensor object sharing it (tied weights, the views the
caller handed in) onto the new memory with ``set_``, so the module keeps
its Parameter objects and their new data lives where the sources write.

A tensor is adopted only when that swap reaches every user of its storage:
its storage holds exactly its bytes, and no tensor the caller did not hand
in refers to it (torch counts a storage's users). Anything else is bound
where it lives, and the reason is reported."""
from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch

# Transports whose allocated memory is written faster than memory bound in
# place: where adoption is on by default.
FASTER_ALLOCATED = ("shm",)

# Descriptors adoption leaves free for everything else the process opens
# (sockets to its peers, files): this many, or a quarter of the limit when
# that is more.
FD_RESERVE = 64


class Group(NamedTuple):
    """The tensor objects sharing one storage that adoption moves together,
    and the wex memory they were moved to."""
    tensors: tuple[torch.Tensor, ...]
    address: int
    nbytes: int


def transport_name(config: object) -> str | None:
    """The transport a job config names (a dict, JSON text, or the path of
    a JSON file, as libwex reads it), or None when it cannot be read here
    (libwex reports a bad config itself)."""
    try:
        if isinstance(config, Mapping):
            doc: Any = config
        elif isinstance(config, str) and config.lstrip().startswith("{"):
            doc = json.loads(config)
        elif isinstance(config, (str, os.PathLike)):
            with open(config, encoding="utf-8") as f:
                doc = json.load(f)
        else:
            return None
        transport = doc.get("transport") if isinstance(doc, Mapping) else None
        if isinstance(transport, Mapping):
            transport = transport.get("name")
        return transport if isinstance(transport, str) else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def fd_budget() -> tuple[int | None, int]:
    """How many tensors adoption may move, each holding one open file
    descriptor (shm keeps a memfd per allocation): the soft RLIMIT_NOFILE
    less what is open and a reserve (None: no limit), and that limit."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None, -1
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 0
    return max(0, soft - used - max(FD_RESERVE, soft // 4)), soft


def within_budget(sizes: dict[str, int], budget: int | None) -> set[str]:
    """The names among `sizes` (name -> bytes) adoption moves: all of them,
    or the `budget` largest."""
    if budget is None or len(sizes) <= budget:
        return set(sizes)
    ranked = sorted(sizes, key=lambda name: (-sizes[name], name))
    return set(ranked[:budget])


def sharers(pairs: list[tuple[str, object]]) -> dict[int, list[torch.Tensor]]:
    """The distinct cpu tensor objects of `pairs`, grouped by the storage
    they share (a StorageImpl's address)."""
    import torch

    out: dict[int, list[torch.Tensor]] = {}
    seen: set[int] = set()
    for _, tensor in pairs:
        if (not isinstance(tensor, torch.Tensor) or id(tensor) in seen or
                tensor.device.type != "cpu"):
            continue
        seen.add(id(tensor))
        out.setdefault(storage_id(tensor), []).append(tensor)
    return out


def storage_id(tensor: torch.Tensor) -> int:
    return int(tensor.untyped_storage()._cdata)


def refusals(bound: dict[str, tuple[torch.Tensor, int]],
             groups: dict[int, list[torch.Tensor]]) -> dict[str, str | None]:
    """For every bound tensor (name -> (tensor, bytes)): why it cannot be
    adopted, or None. Two local tensors on one storage stay where they are
    (libwex refuses overlapping memory, naming both)."""
    owners: dict[int, list[str]] = {}
    for name, (tensor, _) in bound.items():
        if tensor.device.type == "cpu":
            owners.setdefault(storage_id(tensor), []).append(name)
    out: dict[str, str | None] = {}
    for name, (tensor, nbytes) in bound.items():
        names = (owners.get(storage_id(tensor), [name])
                 if tensor.device.type == "cpu" else [name])
        if len(names) > 1:
            out[name] = "its memory is also local tensor %s's" % (
                [n for n in names if n != name][0])
        else:
            out[name] = refusal(tensor, nbytes, groups)
    return out


def refusal(tensor: torch.Tensor, nbytes: int,
            groups: dict[int, list[torch.Tensor]]) -> str | None:
    """Why `tensor` (a bound tensor of `nbytes`) cannot be adopted, or
    None when moving its group's tensors moves every user of its memory."""
    import torch

    if tensor.device.type != "cpu":
        return "a %s tensor (only host tensors are adopted)" % (
            tensor.device.type)
    if nbytes == 0:
        return "empty"
    count = getattr(torch._C, "_storage_Use_Count", None)
    if count is None:
        return "this torch cannot count a storage's users"
    try:
        storage = tensor.untyped_storage()
        if tensor.is_pinned():
            return "pinned memory (adopting it would unpin it)"
        if tensor.storage_offset() != 0 or storage.nbytes() != nbytes:
            return ("a view of a larger buffer (its storage holds %d bytes, "
                    "the tensor %d)" % (storage.nbytes(), nbytes))
        group = groups.get(int(storage._cdata), [])
        for t in group:
            if t.grad_fn is not None:
                return "computed by autograd (not a leaf)"
            if t.is_inference():
                return "an inference tensor (set_ is refused on it)"
        # one reference per tensor object, one for `storage` itself
        users = int(count(storage._cdata)) - 1
        if users != len(group):
            return ("%d tensor(s) not handed to bind share its memory (a "
                    "detached state_dict(), a view kept elsewhere): bind "
                    "the module, or state_dict(keep_vars=True)"
                    % (users - len(group)))
    except RuntimeError as e:  # a tensor subclass without plain storage
        return "its storage cannot be moved (%s)" % str(e).splitlines()[0]
    return None


def move(tensors: list[torch.Tensor], address: int, nbytes: int) -> Group:
    """Copies the group's shared storage into `nbytes` of wex memory at
    `address` and points every tensor of the group at it."""
    import torch

    raw = (ctypes.c_uint8 * nbytes).from_address(address)
    storage = torch.frombuffer(raw, dtype=torch.uint8).untyped_storage()
    storage.copy_(tensors[0].untyped_storage())
    _point(tensors, storage)
    return Group(tuple(tensors), address, nbytes)


def release(group: Group) -> None:
    """Before wex frees a group's memory: copies it into memory of torch's
    own and points the group's tensors there, so the module outlives the
    job. A tensor moved elsewhere since is left alone."""
    import torch

    still = [t for t in group.tensors
             if t.untyped_storage().data_ptr() == group.address]
    if not still:
        return
    storage = torch.empty(group.nbytes, dtype=torch.uint8).untyped_storage()
    storage.copy_(still[0].untyped_storage())
    _point(still, storage)


def _point(tensors: list[torch.Tensor], storage: torch.UntypedStorage) -> None:
    import torch

    with torch.no_grad():
        for t in tensors:
            t.set_(storage, t.storage_offset(), t.size(), t.stride())
