"""query_logs: log sources, the formats they read, and the one projection they all answer with.

The seam every source builds on (a new source needs nothing else):

- `tools.logs.record.LogRecord`: what a source yields for each matched record (instant in
  nanoseconds, service, `Severity` or None and whether it was inferred, message, labels);
- `tools.logs.severity`: the one severity scale (FATAL > ERROR > WARN > INFO > DEBUG > TRACE) and
  every spelling mapped onto it; `level` means "this severity or worse";
- `tools.logs.projection`: `NewestRecords` keeps the `limit` newest matches and counts them all,
  `LogProjection.observation` turns them into the observation data (docs/contracts.md,
  "query_logs projection"), `Window` is the searched window.

A source is an `EvidenceAdapter` (`tools.adapter`): it validates the window, clamps it to
`[logs] max_window_minutes` keeping its end (`Window.asked`), filters where filtering is cheapest,
and hands matched records to the projection. Sources: `file_source` (local files and folders),
`loki_source` (Grafana Loki, with `logql` building its query from structured input only),
`elasticsearch_source` (Elasticsearch / OpenSearch `_search`), `journald_source` (the systemd journal
through `journalctl`). Every request to a log server goes through `http_exchange`, on the one
bounded outbound client (`tools.outbound_http`).

The file source, module by module: `file_names` (which files are logs, the service a name gives),
`file_formats` (the formats and how a file's is recognised), one module per format family
(`json_lines`, `logfmt`, `syslog`, `web_server`, `cri`, `text_lines`, `custom_format`) behind
`line_format.LineFormat`, `timestamps` (zones, year-less stamps, epochs) and `file_scan` (one file
read for one call: bisection by time, the byte search, multi-line records, skip reasons).
"""
