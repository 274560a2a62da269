"""Print the formula catalogue of docs/formulas.md from the registry:
``python -m pyprof.prof.catalogue > /tmp/cat.md`` and paste it under "## Catalogue" (a test checks it is
up to date)."""
from __future__ import annotations

import re

from pyprof.prof.model import registry

FAMILIES = [f for f in registry.Family if f not in (registry.Family.OTHER, registry.Family.TRANSFER)]
_TABLE_MADE = re.compile(r"^(pointwise_|reduce_|foreach_|cast_to_|max_pool|avg_pool|adaptive_)")


def catalogue() -> str:
    """The markdown catalogue: per family, a table of formulas, their names and docstrings."""
    import pyprof.prof  # noqa: F401  (registers the built-in formulas)

    by: dict = {}
    for f in registry.formulas():
        by.setdefault(f.family, []).append(f)
    out = []
    for fam in FAMILIES + sorted(set(by) - set(FAMILIES)):
        fs = by.get(fam, [])
        if not fs:
            continue
        out.append(f"\n### {fam}\n")
        hand = [f for f in fs if not _TABLE_MADE.match(f.fn.__name__)]
        made = [f for f in fs if _TABLE_MADE.match(f.fn.__name__)]
        if hand:
            out += ["| formula | op names | what it counts |", "|---|---|---|"]
            for f in hand:
                doc = " ".join((f.fn.__doc__ or "").split()).replace("|", "/")
                out.append(f"| `{f.fn.__name__}` | {', '.join(f'`{n}`' for n in f.names)} | {doc} |")
        if made:
            out.append("\nFrom the family's table (one formula per row, each answering to `torch.X` and `aten::X`"
                       + (", and `torch.nn.functional.X` for activations" if fam == "pointwise" else "") + "):\n")
            out += ["| formula | FLOPs |", "|---|---|"]
            for f in made:
                out.append(f"| `{f.fn.__name__}` | {' '.join((f.fn.__doc__ or '').split())} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(catalogue(), end="")
