"""The interface coding agents call: ``pyprof mcp``, a Model Context Protocol server (stdio) whose tools answer
from a profile or a records file with small JSON answers that cite what they rest on (answers.py), and the guide
an agent reads first (SKILL.md). It comes after every stage and imports their public names only."""
