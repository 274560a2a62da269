"""Writing: activities joined to their launch's attribution, as record lines (the Python writer and the
compiled core's)."""
