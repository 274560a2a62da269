"""``pyprof run``: one command from a training script to a report (capture with Nsight Systems or the PyTorch
profiler, without editing the script; then parse and report). An entry point above the stages, like the
``pyprof`` command: it uses them all."""
