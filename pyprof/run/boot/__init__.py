"""The folder pyprof run puts first on the script's PYTHONPATH: its sitecustomize.py starts the capture."""
