"""Bring a film: from a film's video files to a reviewed training set (`animegamer film`).

A chain of stages, one module each, every stage's output on disk under the output folder so any
stage can be re-run or resumed alone: cut (scene cuts), clip (17-frame clips), motion (optical
flow and the motion level), caption (a local vision-language model), review (the operator's page),
features (latents and text/image features for training), games (the training and held-out games).
"""
