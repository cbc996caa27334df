"""The DiagnosisDraft: its rules (`rules`), the strict parser (`parser`) with the words that say why a
Draft was refused (`detail`), and the Draft schema of one run (`schema`) (docs/contracts.md,
"DiagnosisDraft")."""
