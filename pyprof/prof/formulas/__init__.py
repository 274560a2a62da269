"""The built-in formulas, one module per family; importing this package registers them all."""
from pyprof.prof.formulas import (attention, backward, conv, gemm, loss, memory, misc, norm,  # noqa: F401
                                  optim, pointwise, reduce)
