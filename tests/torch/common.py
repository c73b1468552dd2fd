"""What the torch tests share: a free port, the backend behind a group,
and the end of a group that leaves nothing to Python's shutdown."""
import gc
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def backend_of(group):
    """The c10d::Backend behind a group's CPU tensors (None: the default group)."""
    import torch
    import torch.distributed as dist
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg._get_backend(torch.device("cpu"))


def end_group():
    """destroy_process_group, after what still holds the groups is gone:
    models with reference cycles (DDP, FSDP) keep their group, and gloo's
    worker threads abort the process if its last works die while Python
    shuts down (about one run in fifteen on torch 2.15)."""
    import torch.distributed as dist
    gc.collect()
    dist.destroy_process_group()
