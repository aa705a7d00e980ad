"""Model adapters. Built-ins register lazily here (module imported on first use); other packages
register through the ``cafe.adapters`` entry-point group."""

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard

# name -> "module:Class"; heavy engines import only when their adapter is asked for
for _name, _target in {
    "qwen2-audio": "cafe.adapters.hf.qwen2_audio:Qwen2AudioAdapter",
    "qwen2.5-omni": "cafe.adapters.hf.qwen2_5_omni:Qwen25OmniAdapter",
    "audio-flamingo-3": "cafe.adapters.hf.audio_flamingo3:AudioFlamingo3Adapter",
    "phi-4-multimodal": "cafe.adapters.hf.phi4mm:Phi4MultimodalAdapter",
    "hf-remote-code": "cafe.adapters.hf.remote:RemoteCodeAdapter",
    "desta2.5": "cafe.adapters.hf.remote:DeSTA25Adapter",
}.items():
    ADAPTERS.add_lazy(_name, _target)

__all__ = ["ADAPTERS", "Adapter", "ModelCard"]
