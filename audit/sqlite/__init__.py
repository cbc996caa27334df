"""The embedded audit: one SQLite file (`store`) and its FTS5 text search (`text_search`)."""
