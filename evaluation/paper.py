"""The paper's Table 1 (arXiv 2504.01014), printed beside a run's figures for scale and always
marked as theirs: their test set (2,000 rounds of 10-round games for 20 characters, from scenes
left out of training), their models and their metric models, which the paper does not name, so
only the order of magnitude and the direction compare with ours."""

from __future__ import annotations

SOURCE = "AnimeGamer paper, arXiv 2504.01014, Table 1"
# metric key -> (AnimeGamer, best baseline: GC)
TABLE1: dict[str, tuple[float, float]] = {
    "clip_i": (0.8132, 0.7960),
    "dreamsim": (0.7403, 0.6416),
    "clip_t": (0.4161, 0.3339),
    "clip_t_e": (0.4012, 0.3158),
    "acc_f": (0.6744, 0.4249),
    "mae_f": (0.4238, 0.7223),
    "acc_s": (0.6773, 0.6779),
    "mae_s": (0.5872, 0.5888),
    "seconds": (24.0, 25.0),
}
