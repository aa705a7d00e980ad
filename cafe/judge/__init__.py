"""CAFE judges: event extraction by an LLM judge, the rule judge for synth, captions."""
