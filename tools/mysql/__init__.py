"""query_mysql: the read-only policy for SQL the model writes, and the adapter that runs what it allows.

`guard` decides what may reach the server, with `secret_reads` (statements that read a secret) and
`diagnostic_surface` (the system views an SRE may read, and what their columns carry); `adapter` runs
it bounded; `statement_digest`, `innodb_status` and `json_members` hide what its results must not show;
`access_probe` finds out at start which diagnostic views the configured account can read.
"""
