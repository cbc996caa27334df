"""The project's tests, benchmarks and their support scripts.

Every entry point under `tests` (pytest, `python -m tests.benchmarks.…`, `python -m tests.support.…`)
imports this package first, so library telemetry is switched off here, before any of them can import
Haystack (which would otherwise mint a user id in the home folder and report usage).
"""

import console  # noqa: F401  (importing the console package switches library telemetry off)
