"""An app that cannot be imported: for the bad-input tests."""

raise RuntimeError("this app is broken on purpose")
