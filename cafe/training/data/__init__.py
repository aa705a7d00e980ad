"""MPAR² data construction (SPEC §7, appendix E): clips + captions → questions per dimension →
question filter → difficulty filter → balanced SFT pool → CoT synthesis → CoT filter → SFT and RL
files. `pipeline.run_pipeline(recipe)` runs every stage resumably; `cafe train data` calls it."""
