"""The model call: the chat generator a run uses (`factory`: the scripted replay model or an
OpenAI-compatible server; `scripted`), the one wrapper around each call (`call`), what a failed call
may say (`failure`), and what each round asks of the server (`request_shaping`, with `server_kind`
and `tool_round_schema`). A round's token usage is `agent.usage`, beside the budget that counts it."""
