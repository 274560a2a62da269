"""The per-kernel table and ``--group-by``: records -> modelled rows, their columns, output formats and the
group-by keys."""
