"""Readers: each input format's rows -> the intermediate form of ``activities`` (activities, launches, ranges,
GPUs), and ``detect``, which reader a file needs."""
