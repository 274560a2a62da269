"""Modelling: a record -> its op call's formula, role and share of FLOPs and bytes; Tensor Cores, peaks,
roofline and occupancy. The registry of op formulas and the formula families (``formulas``)."""
