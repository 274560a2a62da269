"""Side lines: what a capture holds beside its GPU activities (host time, memory events) and the join of a
timing pass."""
