"""The `diagnose` command line and (later) the Textual console."""
