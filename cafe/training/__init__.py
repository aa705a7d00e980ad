"""MPAR² training: data pipeline, judge rewards, SFT and GRPO on TRL."""
