"""Many rank files: each reduced to what the ranks view needs, in processes here or on Dask."""
