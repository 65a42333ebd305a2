"""One measurement of one config: run the server process tree, load it, collect its figures."""
