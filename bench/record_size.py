"""Bytes per record of parse's output, lean (the default) against --raw-markers, on the same export in one run.

    python bench/record_size.py EXPORT.sqlite[.xz] [--kernels 49530]

With ``--kernels``, the export is first scaled up by replication (bench/scale_export.py) to at least that many
kernels: issue 14's figure was taken on tests/data/nsys/emit_nvtx/resnet.sqlite.xz scaled to 49,530 kernels
(635 x 78). Prints, for each form, the records, the bytes of their lines (header and end lines apart) and the
mean per record; then the share of the raw form's bytes each key takes, summed over the records, so that what
grows a record can be seen.
"""
from __future__ import annotations

import argparse
import collections
import json
import lzma
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_export import scale  # noqa: E402  (a sibling script, not a package)


def _sizes(export: str, raw: bool) -> tuple[int, int, collections.Counter]:
    """(records, bytes of their lines with newlines, bytes per key) of parse's output on ``export``."""
    cmd = [sys.executable, "-m", "pyprof.parse", "-q", export] + (["--raw-markers"] if raw else [])
    p = subprocess.run(cmd, capture_output=True, check=True)
    records = size = 0
    per_key: collections.Counter = collections.Counter()
    for line in p.stdout.splitlines():
        d = json.loads(line)
        if "pyprof_header" in d or "pyprof_end" in d:
            continue
        records += 1
        size += len(line) + 1
        for k, v in d.items():
            per_key[k] += len(json.dumps(k)) + 1 + len(json.dumps(v, separators=(",", ":"))) + 1  # "k":v,
    return records, size, per_key


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export")
    p.add_argument("--kernels", type=int, default=0, help="scale the export up to this many kernels first")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        export = a.export
        if export.endswith(".xz"):
            plain = os.path.join(tmp, "in.sqlite")
            with lzma.open(export) as src, open(plain, "wb") as dst:
                dst.write(src.read())
            export = plain
        if a.kernels:
            scaled = os.path.join(tmp, "scaled.sqlite")
            print(f"kernels: {scale(export, scaled, a.kernels)}")
            export = scaled
        results = {form: _sizes(export, form == "raw") for form in ("lean", "raw")}
    for form, (records, size, _keys) in results.items():
        print(f"{form}: {records} records, {size} bytes, {size / records:.0f} bytes per record")
    lean, raw = results["lean"][1], results["raw"][1]
    print(f"lean / raw: {lean / raw:.3f}")
    records, size, per_key = results["raw"]
    print("bytes per record by key (raw form):")
    for k, n in per_key.most_common(12):
        print(f"  {k:<22} {n / records:7.0f}  {100 * n / size:4.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
