"""The `diagnose` command line and the Textual console.

Importing this package switches library telemetry off before anything can import Haystack (see
`console.telemetry`); the command line turns it back on only when the configuration opts in. It also
keeps Haystack from attaching a log handler of its own (`console.log_records`).
"""

from console.log_records import keep_library_logs_in_our_handler
from console.telemetry import switch_off

switch_off()
keep_library_logs_in_our_handler()
