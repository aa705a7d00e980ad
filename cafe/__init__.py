"""cafe: evaluate large audio-language models on audio reasoning and measure their perception."""

__version__ = "0.1.0"
