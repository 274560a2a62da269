"""torch.compile under ``pyprof.init()``: each kernel Inductor generates gets a range naming what it computes.

At compile time Inductor reports, for every kernel it emits (a Triton kernel, a C++ kernel, an extern call
such as cuBLAS' ``mm``), the FX nodes it was generated from (its provenance tracking hook). pyprof takes that
hook and builds the kernel's marker once: the aten ops it fuses, their shapes and dtypes, the user's line of
each (the nodes' ``stack_trace``), and whether the graph is forward or backward (pyprof.nvtx.inductor_marker).
It then writes one statement before the kernel's call in the generated wrapper, which at run time pushes that
marker as a range; the range closes at the next kernel's statement or at the wrapper's return. So the marker
travels inside the capture, next to the launch, like every other pyprof range: no side file to keep with the
export, and two graphs that both name a kernel ``triton_poi_fused_add_0`` cannot be confused. Format: docs/markers.md, "Compiled kernel ranges".

While this is installed Inductor's FX-graph and AOTAutograd caches are off: a cache hit loads generated code
without generating it, and its kernels would have no marker. Compiling takes longer; nothing else changes
(the graphs, their guards and their number are Dynamo's as without pyprof).
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import sys
import threading

from pyprof.nvtx import emit, payload
from pyprof.nvtx.inductor_marker import kernel_nodes, marker

_KINETO = _profiler_type = _record_function = None  # set by install: torch's, looked up once
_kernels: dict[int, "_Kernel"] = {}  # handle -> the kernel's marker
_forward_sites: dict[str, str] = {}  # compile id -> the line that last ran its forward graph
_handles = iter(range(1, sys.maxsize))
# Per thread: .held, the open kernel range (the emitter that pushed it, the profiler's range or None); .frame and
# .site, the wrapper run whose caller was looked up last, and that caller's line.
_open = threading.local()
_saved: list = []  # (owner, name, original) to put back
_WRAPPER = "torch._inductor.codegen.wrapper"  # loaded by Inductor before it looks up its caches or generates code
_pending: list = [None]  # the import watcher waiting for _WRAPPER, while there is one
_state = None  # pyprof.nvtx.state while installed
# What the generated code runs before each kernel call (and at its return, with 0). Self-contained, so that it runs
# in any wrapper, a subgraph's included, whatever its imports; importing a loaded module is a dictionary lookup.
_STATEMENT = "import pyprof.nvtx.inductor as _pyprof_kernels; _pyprof_kernels.enter"


def enter(handle: int) -> None:
    """Close this thread's open kernel range, then open the one of ``handle`` (0: open none). Called from the
    generated wrapper code, so it must never raise."""
    state = _state
    emitter = state.emitter if state is not None else None
    held = getattr(_open, "held", None)
    if held is not None:
        _open.held = None
        pushed, recorded = held
        pushed.pop()
        if recorded is not None:
            recorded.__exit__(None, None, None)
    if handle == 0:
        _open.frame = None  # the wrapper returns: its frame (holding its buffers) is not kept
        return
    if emitter is None:
        return
    kernel = _kernels.get(handle)
    if kernel is None:
        return
    site = kernel.data["site"] or _caller_site(emitter, kernel)
    attrs = kernel.attrs if kernel.attrs is not None else kernel.sited(site, emitter)
    emitter.push(attrs, next(emitter.ids))
    recorded = None
    if _torch_profiler_on():
        # The PyTorch profiler records no NVTX: the same marker goes into its trace as a record_function range.
        recorded = _record_function(kernel.profiler_text(site))
        recorded.__enter__()
    _open.held = (emitter, recorded)


def _torch_profiler_on() -> bool:
    try:
        return _profiler_type() == _KINETO
    except Exception:  # noqa: BLE001 - a torch without the query: no PyTorch-profiler ranges
        return False


class _Kernel:
    """One generated kernel's marker. ``attrs`` is the sink's attributes when the marker names its own site; for a
    kernel whose nodes have no user frame (a graph of torch's own modules) it is None, and the site is the line
    that called the compiled code, found at run time (:meth:`sited`)."""

    __slots__ = ("data", "attrs", "compile_id", "backward", "variants", "texts")

    def __init__(self, data: dict, attrs, compile_id: str, backward: bool):
        self.data, self.attrs, self.compile_id, self.backward = data, attrs, compile_id, backward
        self.variants: dict = {}  # site -> the sink's attributes of the marker with that site
        self.texts: dict = {}  # site (or ("profiler", site)) -> the marker's text with that site

    def text(self, site: str) -> str:
        text = self.texts.get(site)
        if text is None:
            text = self.texts[site] = json.dumps({**self.data, "site": site}, separators=(",", ":"))
        return text

    def profiler_text(self, site: str) -> str:
        """The marker as the PyTorch profiler's range name: a Python literal (parse reads those as it reads legacy
        PyProf markers), because the profiler writes names into its JSON trace without escaping their quotes."""
        key = ("profiler", site)
        text = self.texts.get(key)
        if text is None:
            text = self.texts[key] = payload.profiler_literal({**self.data, "site": site})
        return text

    def sited(self, site: str, emitter):
        attrs = self.variants.get(site)
        if attrs is None:
            attrs = self.variants[site] = emitter.sink.attributes(self.text(site))
        return attrs


def _caller_site(emitter, kernel: _Kernel) -> str:
    """The user's line that ran this graph: the innermost frame outside torch and pyprof, found once per run of a
    wrapper. A backward graph runs on autograd's thread, outside any user frame: it takes the line that last ran
    the forward graph of the same compilation."""
    if kernel.backward:
        return _forward_sites.get(kernel.compile_id, "")
    wrapper = sys._getframe(2)  # the frame of the wrapper's call: _caller_site <- enter <- call
    if getattr(_open, "frame", None) is wrapper:
        return _open.site
    f = wrapper.f_back  # the wrapper is generated code: never the user's
    while f is not None and emitter.is_internal(f.f_code.co_filename):
        f = f.f_back
    site = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else ""
    _open.frame, _open.site = wrapper, site
    _forward_sites[kernel.compile_id] = site
    return site


def install(state) -> None:
    """Name the kernels torch.compile generates while ``state`` (pyprof.nvtx.state) captures: now if Inductor's code
    generator is loaded, else as soon as it is (Inductor takes about a second to import: a script that never
    compiles does not pay for it)."""
    if _WRAPPER in sys.modules:
        _take(state)
    elif _pending[0] is None:
        _pending[0] = _AfterImport(_WRAPPER, lambda: _take(state))
        sys.meta_path.insert(0, _pending[0])


def remove() -> None:
    """Put back everything :func:`install` changed."""
    global _state
    _state = None
    if _pending[0] is not None:
        _forget(_pending[0])
    for owner, name, value in reversed(_saved):
        setattr(owner, name, value)
    _saved.clear()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then`` once, right after the module ``name`` has been executed by its own loader."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        _forget(self)  # the real finders find it; this one only watches
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, then = spec.loader, self.then

        class Watching(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                then()

        spec.loader = Watching()
        return spec


def _forget(finder) -> None:
    _pending[0] = None
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)


def _take(state) -> bool:
    """Take Inductor's provenance hook and make its caches miss. False where this torch has no such hook (nothing
    is changed then)."""
    global _state, _KINETO, _profiler_type, _record_function
    try:
        from torch._inductor import config, debug
        from torch._inductor.codegen import wrapper
        import torch._functorch.config as functorch_config
    except Exception:  # noqa: BLE001 - an Inductor that cannot load compiles nothing to name
        return False
    original = getattr(debug, "set_kernel_post_grad_provenance_tracing", None)
    write = getattr(wrapper.PythonWrapperCodegen, "write_provenance_debug_handle", None)
    ret = getattr(wrapper.PythonWrapperCodegen, "generate_return", None)
    if original is None or write is None or ret is None:
        return False
    _state = state
    import torch

    _profiler_type = torch._C._autograd._profiler_type
    _KINETO = torch._C._profiler.ActiveProfilerType.KINETO
    _record_function = torch._C._profiler._RecordFunctionFast
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        emit.add_internal_dir(cache_dir())
    except (ImportError, OSError):
        pass
    for owner, name, value in ((config, "fx_graph_cache", False), (config, "fx_graph_remote_cache", False),
                               (functorch_config, "enable_autograd_cache", False),
                               (functorch_config, "enable_remote_autograd_cache", False)):
        if hasattr(owner, name):
            _replace(owner, name, value)

    def provenance(node_schedule, kernel_name, is_extern=False, *more, **kw):
        handle = None
        try:
            handle = _describe(node_schedule, kernel_name, is_extern, state)
        except Exception:  # noqa: BLE001 - a kernel pyprof cannot describe keeps Inductor's own name
            handle = None
        theirs = original(node_schedule, kernel_name, is_extern, *more, **kw)
        return _Handle(handle, theirs) if handle is not None else theirs

    def write_handle(self, kernel_name, debug_handle=None):
        if isinstance(debug_handle, _Handle):
            self.writeline(f"{_STATEMENT}({debug_handle.ours})")
            debug_handle = debug_handle.theirs
        return write(self, kernel_name, debug_handle)

    def generate_return(self, output_refs):
        self.wrapper_call.writeline(f"{_STATEMENT}(0)")
        return ret(self, output_refs)

    for mod in list(sys.modules.values()):
        name = getattr(mod, "__name__", "") or ""
        if name.startswith("torch._inductor") and getattr(mod, "set_kernel_post_grad_provenance_tracing", None) \
                is original:
            _replace(mod, "set_kernel_post_grad_provenance_tracing", provenance)
    _replace(wrapper.PythonWrapperCodegen, "write_provenance_debug_handle", write_handle)
    _replace(wrapper.PythonWrapperCodegen, "generate_return", generate_return)
    return True


class _Handle:
    """What the provenance hook returns while pyprof holds it: pyprof's handle and Inductor's own (or None)."""

    __slots__ = ("ours", "theirs")

    def __init__(self, ours: int, theirs):
        self.ours, self.theirs = ours, theirs

    def __str__(self) -> str:  # where Inductor formats the handle itself
        return str(self.theirs)


def _replace(owner, name: str, value) -> None:
    _saved.append((owner, name, getattr(owner, name)))
    setattr(owner, name, value)


def _describe(node_schedule, kernel_name: str, is_extern: bool, state) -> int | None:
    """Build the marker of one kernel, register it with the sink, and return its handle (None when unknown)."""
    emitter = state.emitter
    if emitter is None:
        return None
    from torch._inductor.virtualized import V

    graph = V.graph
    if getattr(graph, "cpp_wrapper", False):
        return None  # the handle statement is Python; AOTInductor's C++ wrapper is not covered
    nodes, snodes = kernel_nodes(node_schedule, is_extern)
    if not nodes:
        return None
    data = marker(kernel_name, nodes, snodes, graph, emitter)
    handle = next(_handles)
    attrs = emitter.sink.attributes(json.dumps(data, separators=(",", ":"))) if data["site"] else None
    _kernels[handle] = _Kernel(data, attrs, data["graph_id"], data["graph"] == "backward")
    return handle
