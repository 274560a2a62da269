"""Loading records: JSON lines (and legacy PyProf dicts) checked against the record contract, and what parse's
side lines say (window, program, join, the inputs' names)."""
