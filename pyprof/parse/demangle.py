"""C++ symbol demangling for nvprof exports (nsys stores kernel names demangled already).

Uses the C++ runtime's own ``__cxa_demangle`` through ctypes: exact, fast, and no dependency. Where no
C++ runtime is loadable the mangled name is kept (counted, never an error).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

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


def short_name(demangled: str) -> str:
    """The bare function name of a demangled signature, as nsys's shortName has it.

    ``void at::native::foo<float, 4>(float*, int)`` -> ``foo``: drop the return type, the parameter list,
    template arguments and namespaces, at nesting depth zero only.
    """
    s = demangled
    # Cut the parameter list: the last '(' at angle/paren depth zero.
    depth = 0
    cut = len(s)
    for i in range(len(s) - 1, -1, -1):
        ch = s[i]
        if ch == ")" or ch == ">":
            depth += 1
        elif ch == "(" or ch == "<":
            depth -= 1
            if depth == 0 and ch == "(":
                cut = i
                break
    s = s[:cut]
    # Drop template arguments at depth zero.
    out = []
    depth = 0
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.rsplit(" ", 1)[-1]  # return type
    return s.rsplit("::", 1)[-1] or demangled
