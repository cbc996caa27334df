"""Run events: the typed events of a run (`run_events`, docs/contracts.md, "Run events"), the emitter
that numbers, time-stamps and redacts each once and hands it to every sink (`emitter`), and the
redaction that keeps tool call IDs exact (`redaction`)."""
