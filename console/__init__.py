"""The `diagnose` command line and the Textual console.

Importing this package switches library telemetry off before anything can import Haystack (see
`console.telemetry`); the command line turns it back on only when the configuration opts in.
"""

from console.telemetry import switch_off

switch_off()
