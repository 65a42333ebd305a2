"""The default search spaces, one TOML file per server.

Installed, this folder is the package `tuner.search_spaces` (pyproject.toml maps it), so the
files travel with a wheel; `tuner.search.space.default_space_path` finds them either way.
"""
