"""query_mysql: the read-only policy for SQL the model writes, and the adapter that runs what it allows.

`guard` decides what may reach the server (with `secret_reads` for statements that read a secret);
`adapter` runs it bounded; `json_members` hides what its results must not show.
"""
