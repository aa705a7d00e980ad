"""Benchmarks: MMAU, MMAR, SAKURA, MMSU, AIR-Bench foundation, MMAU-Pro (official metadata files
or local HF copies) and the synthetic one."""

from cafe.benchmarks.base import BENCHMARKS, Benchmark, LoadedBenchmark

for _name, _target in {
    "mmau": "cafe.benchmarks.mmau:MMAU",
    "mmar": "cafe.benchmarks.mmar:MMAR",
    "sakura": "cafe.benchmarks.sakura:SAKURA",
    "mmsu": "cafe.benchmarks.mmsu:MMSU",
    "airbench": "cafe.benchmarks.airbench:AIRBench",
    "mmau-pro": "cafe.benchmarks.mmau_pro:MMAUPro",
    "synth": "cafe.benchmarks.synth:SynthBenchmark",
    "spoken": "cafe.benchmarks.spoken:SpokenBenchmark",
    "bigbenchaudio": "cafe.benchmarks.bigbenchaudio:BigBenchAudio",
    "voicebench": "cafe.benchmarks.voicebench:VoiceBench",
    "starbench": "cafe.benchmarks.starbench:StarBench",
}.items():
    BENCHMARKS.add_lazy(_name, _target)

__all__ = ["BENCHMARKS", "Benchmark", "LoadedBenchmark"]
