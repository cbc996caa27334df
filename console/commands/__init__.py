"""The `diagnose` command line (docs/contracts.md, "CLI"): `main` parses it and runs the command's
handler; each command is one module that adds its own options and handler."""
