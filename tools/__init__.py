"""Evidence tools: the three frozen tool definitions, the ToolBoundary and the adapters behind it."""
