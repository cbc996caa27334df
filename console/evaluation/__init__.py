"""`diagnose eval`: a set of incident cases, run N times each against the configured model, scored.

The Draft contract is structural, so scoring needs no judge model: whether a Draft was accepted,
whether it concluded, which tools its findings cite, and what the harness recorded on the way.
"""
