"""A WSGI app that cannot be imported: no server config can ever run it."""

raise ImportError("faulty_import: this app's dependency 'nosuchlib' is not installed")
