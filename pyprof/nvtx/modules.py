"""Ranges named after the ``nn.Module`` being called (``encoder.layers.0.self_attn``), through torch's
global module hooks, so per-layer reports need no hand-written annotation."""
from __future__ import annotations

import threading
import weakref

import torch
from torch.nn.modules import module as nn_module

from pyprof.nvtx import payload


class ModuleRanges:
    """Global forward pre-hook and hook that push and pop one range per module call."""

    def __init__(self, state):
        self.state = state
        self.names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.texts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.local = threading.local()
        self.handles = []

    def install(self) -> None:
        _never_compiled(ModuleRanges._pre, ModuleRanges._post)
        self.handles = [nn_module.register_module_forward_pre_hook(self._pre),
                        # always_call: the range is popped even when forward raises.
                        nn_module.register_module_forward_hook(self._post, always_call=True)]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _text(self, module) -> str:
        text = self.texts.get(module)
        if text is None:
            # torch.compile's OptimizedModule stands for the module it compiled.
            target = getattr(module, "_orig_mod", module)
            name = self.names.get(target)
            if name is None:
                # Called outside any known root: this module becomes a root, and its children get
                # names qualified under it.
                self._name_tree(target)
                name = self.names[target]
            text = payload.module_marker(name, type(target).__name__)
            self.texts[module] = text
        return text

    def _name_tree(self, root) -> None:
        root_name = type(root).__name__
        # A larger tree named later wins: its qualified names are the ones users see in print(model).
        for qualname, sub in root.named_modules():
            self.names[sub] = qualname or root_name
            self.texts.pop(sub, None)

    def _pre(self, module, args):
        emitter = self.state.emitter
        if emitter is None or torch.compiler.is_compiling():
            return None
        emitter.push_text(self._text(module))
        self.local.depth = getattr(self.local, "depth", 0) + 1
        return None

    def _post(self, module, args, output):
        if torch.compiler.is_compiling():
            return None
        depth = getattr(self.local, "depth", 0)
        if depth > 0 and self.state.emitter is not None:
            self.local.depth = depth - 1
            self.state.emitter.pop()
        return None


def _never_compiled(*functions) -> None:
    """Tell Dynamo never to compile these functions' frames, nor what they call. A compiled module runs the global
    hooks under Dynamo's frame hook, which would compile each hook as a frame of its own (a graph of nothing: the
    hooks do nothing while Dynamo traces), counted among its frames as pyprof's. Inside a traced region Dynamo still
    inlines them, as before. Torch versions without the setting compile them as before."""
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:
        return
    for fn in functions:
        set_code_exec_strategy(fn.__code__, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))
