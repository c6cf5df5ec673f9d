"""The AnimeGamer video decoder on diffusers (CogVideoX-2B DiT + 3D VAE).

Heavy imports (torch, diffusers) happen on first use, so `import inference.decoder` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the real names for type checkers; at run time __getattr__ imports them on first use
    from .convert import convert_decoder_main
    from .pipeline import AnimeGamerDecoder, load_decoder, warm_up_compiled
    from .transformer import AnimeGamerTransformer3DModel

__all__ = ["AnimeGamerDecoder", "AnimeGamerTransformer3DModel", "convert_decoder_main", "load_decoder", "warm_up_compiled"]


def __getattr__(name: str):
    if name in ("AnimeGamerDecoder", "load_decoder", "warm_up_compiled"):
        from . import pipeline

        return getattr(pipeline, name)
    if name == "AnimeGamerTransformer3DModel":
        from .transformer import AnimeGamerTransformer3DModel

        return AnimeGamerTransformer3DModel
    if name == "convert_decoder_main":
        from .convert import convert_decoder_main

        return convert_decoder_main
    raise AttributeError(name)
