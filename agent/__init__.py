"""The diagnosis use case: one Haystack Agent inside a budget and progress-protocol harness."""
