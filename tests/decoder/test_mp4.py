"""Decoded frames through the shared encoder: an MP4 with the expected frames, size and format."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLCogVideoX

from inference.decoder.pipeline import AnimeGamerDecoder
from inference.mp4 import encode_mp4, ffmpeg_binary
from testkit.tiny.decoder import TINY_SIZE, TINY_VAE_CONFIG


@pytest.fixture(scope="module")
def mp4(transformer, tmp_path_factory):
    torch.manual_seed(0)
    dec = AnimeGamerDecoder(transformer, AutoencoderKLCogVideoX(**TINY_VAE_CONFIG), steps=3, **TINY_SIZE)
    rep = np.random.default_rng(0).standard_normal((226, 32)).astype(np.float32)
    data = encode_mp4(dec.decode(rep, 2.5, seed=42), fps=dec.fps)
    path = tmp_path_factory.mktemp("mp4") / "clip.mp4"
    path.write_bytes(data)
    return path, data


def test_mp4_decodes_to_17_frames_of_the_clip_size(mp4):
    path, _ = mp4
    h, w = TINY_SIZE["height"], TINY_SIZE["width"]
    raw = subprocess.run(
        [ffmpeg_binary(), "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        check=True, capture_output=True,
    ).stdout
    assert len(raw) == 17 * h * w * 3
    frames = np.frombuffer(raw, np.uint8).reshape(17, h, w, 3)
    assert frames.std() > 0  # a picture, not an empty stream


@pytest.mark.skipif(shutil.which("ffprobe") is None, reason="ffprobe not on PATH")
def test_mp4_stream_is_h264_yuv420p_8fps_faststart(mp4):
    path, data = mp4
    info = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
         "stream=codec_name,pix_fmt,width,height,r_frame_rate,nb_read_frames", "-of", "json", str(path)],
        check=True, capture_output=True, text=True,
    ).stdout)["streams"][0]
    assert info["codec_name"] == "h264" and info["pix_fmt"] == "yuv420p"
    assert (info["width"], info["height"]) == (TINY_SIZE["width"], TINY_SIZE["height"])
    assert info["r_frame_rate"] == "8/1" and int(info["nb_read_frames"]) == 17
    assert data.index(b"moov") < data.index(b"mdat")  # +faststart
