"""Which torch callables get a range, and the wrapper that gives it to them.

Every patch is recorded as (owner, name, what the owner's own ``__dict__`` held) so that ``uninit()`` puts
torch back exactly: an attribute that was inherited (most ``Tensor`` methods live on ``TensorBase``) is
deleted again rather than set.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import types

import torch

_MISSING = object()

# Never wrapped: they launch no kernel and are called so often (often by torch itself, and by our own
# signature code) that a range would be noise, or wrapping them would recurse.
_SKIP_PREFIXES = ("is_", "get_", "set_", "use_", "are_", "enable_", "disable_", "register_", "sym_",
                  "can_", "has_", "compiled_with", "_")
_SKIP_NAMES = frozenset("""
    size dim ndimension nelement numel stride storage_offset data_ptr item tolist numpy element_size
    storage untyped_storage detach detach_ requires_grad_ retain_grad backward dim_order type
    as_subclass share_memory_ apply_ map_ map2_ new_tensor
    manual_seed seed initial_seed typename load save compile export vmap cond while_loop
    broadcast_shapes result_type promote_types fork wait autocast no_grad enable_grad inference_mode
    set_grad_enabled handle_torch_function boolean_dispatch assert_int_or_pair
    init_process_group destroy_process_group new_group new_subgroups monitored_barrier
    """.split())

# Operators are dunders, so the public-name rule above would skip them.
TENSOR_OPERATORS = tuple("""
    __add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __matmul__ __rmatmul__
    __imatmul__ __truediv__ __rtruediv__ __itruediv__ __floordiv__ __rfloordiv__ __ifloordiv__ __mod__
    __rmod__ __imod__ __pow__ __rpow__ __ipow__ __neg__ __pos__ __abs__ __invert__ __and__ __rand__
    __iand__ __or__ __ror__ __ior__ __xor__ __rxor__ __ixor__ __lshift__ __rlshift__ __ilshift__
    __rshift__ __rrshift__ __irshift__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __getitem__ __setitem__
    """.split())

# Private torch functions that are the kernels of optimizers and mixed-precision scaling.
_PRIVATE_OPS = ("_foreach_", "_fused_", "_scaled_mm", "_amp_", "_scaled_dot_product")

DISTRIBUTED_OPS = tuple("""
    all_reduce all_gather all_gather_into_tensor all_gather_object reduce_scatter reduce_scatter_tensor
    broadcast reduce all_to_all all_to_all_single barrier send recv isend irecv gather scatter
    batch_isend_irecv broadcast_object_list
    """.split())


def _is_op(name: str, obj) -> bool:
    if name in _SKIP_NAMES or isinstance(obj, type) or isinstance(obj, types.ModuleType):
        return False
    if name.startswith(_SKIP_PREFIXES) and not name.startswith(_PRIVATE_OPS):
        return False
    if not callable(obj):
        return False
    module = getattr(obj, "__module__", None)
    # Re-exports from typing, builtins and friends live in these namespaces too.
    return module is None or module.startswith("torch")


def targets() -> list[tuple[object, str, str]]:
    """Return (owner, attribute name, marker ``mod``) for every callable ``init()`` wraps."""
    found = []
    namespaces = [(torch, "torch"), (torch.nn.functional, "torch.nn.functional"), (torch.linalg, "torch.linalg"),
                  (torch.fft, "torch.fft"), (torch.special, "torch.special")]
    for owner, mod in namespaces:
        for name in dir(owner):
            obj = getattr(owner, name, None)
            if _is_op(name, obj) and isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
                found.append((owner, name, mod))
    for name in dir(torch.Tensor):
        obj = getattr(torch.Tensor, name, None)
        if name in TENSOR_OPERATORS or (_is_op(name, obj) and not name.startswith("_")):
            if callable(obj) and not isinstance(obj, (property, type)):
                found.append((torch.Tensor, name, "torch.Tensor"))
    if torch.distributed.is_available():
        for name in DISTRIBUTED_OPS:
            if callable(getattr(torch.distributed, name, None)):
                found.append((torch.distributed, name, "torch.distributed"))
    return found


class Patches:
    """The set of attributes pyprof replaced, and what to put back."""

    def __init__(self):
        self.saved: list[tuple[object, str, object, object]] = []  # owner, name, own value, wrapper

    def replace(self, owner, name: str, new) -> None:
        own = vars(owner).get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        self.saved.append((owner, name, own, new))
        setattr(owner, name, new)

    @staticmethod
    def _put_back(owner, name: str, own) -> None:
        if own is _MISSING:
            try:
                delattr(owner, name)
            except AttributeError:
                pass
        else:
            setattr(owner, name, own)

    def restore(self) -> None:
        for owner, name, own, _ in reversed(self.saved):
            self._put_back(owner, name, own)
        self.saved.clear()

    @contextlib.contextmanager
    def suspended(self, keep=lambda owner, name: False):
        """Put the originals back for the duration of the block (except where ``keep`` says so)."""
        undone = [e for e in reversed(self.saved) if not keep(e[0], e[1])]
        for owner, name, own, _ in undone:
            self._put_back(owner, name, own)
        try:
            yield
        finally:
            for owner, name, _, new in reversed(undone):
                setattr(owner, name, new)


def make_wrapper(fn, mod: str, op: str, state, skip_self: bool = False):
    """Return a function that calls ``fn`` inside a range; results and exceptions pass through untouched.

    ``state`` is the capture state (``pyprof.nvtx.state``): when it is off, or when torch.compile is
    tracing (``is_compiling`` is a constant to Dynamo, so the traced graph holds ``fn`` alone), the
    wrapper calls ``fn`` and nothing else.
    """
    is_compiling = torch.compiler.is_compiling
    getframe = sys._getframe

    def wrapper(*args, **kwargs):
        emitter = state.emitter
        if emitter is None or is_compiling():
            return fn(*args, **kwargs)
        emitter.enter(wrapper, mod, op, args[1:] if skip_self else args, kwargs, getframe(1))
        try:
            return fn(*args, **kwargs)
        finally:
            emitter.pop()

    try:
        functools.update_wrapper(wrapper, fn)
    except (AttributeError, TypeError):  # some builtins lack __dict__ or __name__
        pass
    wrapper.__pyprof_wrapped__ = fn
    # Dynamo knows torch's functions by identity, from a table it builds by name when it is first imported: built
    # after init(), "torch.conv2d" is this wrapper, and the function it calls is a builtin Dynamo does not know (a
    # graph break at every call, and reduce-overhead's CUDA graphs cut in pieces). Dynamo reads this attribute as
    # "trace fn instead", both when it builds the table and when it meets the wrapper in a traced frame.
    wrapper._torchdynamo_inline = fn
    return wrapper
