"""The test suite, laid out like the code: a folder per package of `tuner/` (`servers/`,
`search/`, `loadgen/`, ...), the CLI run end to end as a user runs it in `commands/`, tests of
`tuner/`'s top-level modules here, and the helpers, test apps and stored studies in `support/`.
The fixtures and the suite's own rules (the `server` marker) are in `conftest.py`."""
