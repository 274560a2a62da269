"""C++ symbol demangling for nvprof exports, and for the names a PyTorch-profiler trace leaves mangled (nsys stores
kernel names demangled already).

Uses the C++ runtime's own ``__cxa_demangle`` through ctypes: exact, fast, and no dependency. Where no
C++ runtime is loadable the mangled name is kept (counted, never an error).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re

_demangler = None


def _load():
    global _demangler
    if _demangler is not None:
        return _demangler
    _demangler = False
    for name in (ctypes.util.find_library("stdc++"), "libstdc++.so.6", ctypes.util.find_library("c++")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            fn = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p  # a malloc'ed char*: freed below
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        _demangler = fn
        break
    return _demangler


_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """Return the demangled form of an Itanium C++ symbol, or ``name`` unchanged if it is not one."""
    if not name.startswith("_Z"):
        return name
    fn = _load()
    if not fn:
        return name
    status = ctypes.c_int(0)
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        _libc.free(ptr)


#: Longer names are shortened from their first this many characters: the scan below runs in Python, about 0.2 s
#: a MB, and a real kernel name (a CUTLASS template included) is a few kB. prof classifies names by as many.
SHORT_NAME_SCAN_CHARS = 1 << 16


def short_name(demangled: str) -> str:
    """The bare function name of a demangled signature, as nsys's shortName has it.

    ``void at::native::foo<float, 4>(float*, int)`` -> ``foo``: the name before the parameter list, without
    return type, template arguments and namespaces. Template arguments may hold expressions with parentheses
    and comparisons (``std::enable_if<(((8)>(0))), void>::type vllm::fused_add_rms_norm_kernel<...>(...)``),
    so angle brackets count only outside parentheses. Returns the input when it has no such shape. A name
    longer than SHORT_NAME_SCAN_CHARS is shortened from its beginning (the function's name comes before its
    template arguments and parameters), at most that long. A symbol left mangled (the C++ runtime did not know
    its mangling) gives its function's name as _mangled_function reads it.
    """
    if demangled.startswith("_Z"):
        return _mangled_function(demangled)
    if len(demangled) > SHORT_NAME_SCAN_CHARS:
        return short_name(demangled[:SHORT_NAME_SCAN_CHARS])
    params = _parameter_list(demangled)
    head = demangled[:params] if params is not None else demangled
    out = []
    angle = paren = 0
    for ch in head:
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif paren == 0 and ch == "<":
            angle += 1
            continue
        elif paren == 0 and ch == ">" and angle:
            angle -= 1
            continue
        if angle == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.rsplit(" ", 1)[-1]  # return type
    s = s.rsplit("::", 1)[-1]
    return s if s and not s.startswith("(") else demangled


def _parameter_list(s: str) -> int | None:
    """Where the parameter list starts: the '(' at the outermost level whose ')' ends the signature (a
    trailing ``const`` aside), or None."""
    end = s.rstrip()
    if end.endswith(" const"):
        end = end[:-6].rstrip()
    if not end.endswith(")"):
        return None
    depth = 0
    for i in range(len(end) - 1, -1, -1):
        ch = end[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return i
    return None


_LENGTH = re.compile(r"\d+")


def _mangled_function(symbol: str) -> str:
    """The function's name in an Itanium symbol the C++ runtime could not demangle (a mangling newer than it:
    GCC 12's cannot read std::bfloat16_t, ``DF16b``, in ROCm's ck_tile kernels): the last source name of its
    leading name before any template arguments, ``_ZN7ck_tile6kentryILi1E...`` -> ``kentry``. A kernel is a free
    function, so that is its name (a member of a class template would give the class's). Only that prefix is read
    (lengths and names, ``std::`` written ``St``, cv-qualifiers), which every mangling shares; a symbol of any
    other shape is returned whole."""
    nested = symbol.startswith("N", 2)
    i = 3 if nested else 2
    while nested and i < len(symbol) and symbol[i] in "rVKRO":  # cv- and ref-qualifiers of a member function
        i += 1
    if symbol.startswith("St", i):
        i += 2
    name = None
    while (m := _LENGTH.match(symbol, i)) is not None:
        n = int(m.group())
        i = m.end() + n
        if n == 0 or i > len(symbol):
            return symbol
        name = symbol[m.end():i]
        if not nested:
            break
    return name or symbol
