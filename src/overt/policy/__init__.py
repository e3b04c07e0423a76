"""The gate every tool call passes: capabilities, policy rules, human approval."""
