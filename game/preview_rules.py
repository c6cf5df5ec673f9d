"""The preview backend's stand-in for the model: state changes read off the motion words.

The real AnimeGamer MLLM predicts four values per turn (motion level, social, entertainment,
stamina, each -5..5). Without a model, the preview derives them from the words of the
instruction by these rules, so a game played on the preview still moves in a sensible way:

1. Each word of the motion is looked up in the word lists below (a word matches a stem when it
   starts with it, so "flying" matches "fly"). The strongest matching category sets the base
   motion level: rest 1, calm 2, active 3, fast 4; a motion with no known word is calm (2).
2. The adverb adds one level when it is brisk ("quickly", "excitedly", ...) and removes one when
   it is gentle ("slowly", "calmly", ...). The motion level is then clamped to 1..5.
3. Stamina: resting words give +2 (sleeping +3); otherwise effort costs stamina:
   2 - motion level (calm 0, active -1, fast -2, level 5 -3).
4. Social: +2 when the motion is social ("talk", "hug", "wave", ...), +1 for each other
   character in the shot (at most +2); alone and not social: 0.
5. Entertainment: +2 for playful words ("play", "fly", "dance", "laugh", ...), -1 for chores
   ("deliver", "clean", "work", ...), +1 for eating; a night or evening scene adds +1 to a
   playful motion.
Every value is clamped to -5..5.
"""

from __future__ import annotations

import re

from game.states import PRED_MAX, PRED_MIN, Prediction

REST = ("sleep", "nap", "lie", "lying", "sit", "rest", "read", "stand", "look", "watch", "wait", "relax")
CALM = ("walk", "talk", "turn", "smile", "wave", "hold", "eat", "hug", "drink", "cook", "write", "listen", "sing")
ACTIVE = ("run", "swim", "jump", "dance", "play", "ride", "climb", "carry", "deliver", "clean", "work", "laugh")
FAST = ("fly", "flies", "race", "chase", "dash", "sprint", "drive", "fight", "rush", "dive")

SOCIAL = ("talk", "hug", "wave", "smile", "greet", "laugh", "play", "kiss", "dance", "sing", "deliver", "share")
PLAYFUL = ("play", "fly", "flies", "dance", "laugh", "jump", "ride", "swim", "sing", "race", "dive")
CHORES = ("deliver", "clean", "work", "carry", "cook", "wash", "repair")
EATING = ("eat", "drink", "taste")

BRISK = ("quickly", "fast", "excitedly", "energetically", "hurriedly", "wildly", "rapidly", "eagerly")
GENTLE = ("slowly", "gently", "calmly", "carefully", "quietly", "softly", "lazily", "smoothly")

_LEVELS = ((FAST, 4), (ACTIVE, 3), (CALM, 2), (REST, 1))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.casefold())


def _has(words: list[str], stems: tuple[str, ...]) -> bool:
    return any(w.startswith(s) for w in words for s in stems)


def _clamp(v: int, lo: int = PRED_MIN, hi: int = PRED_MAX) -> int:
    return max(lo, min(hi, v))


def motion_level(motion: str, adverb: str = "") -> int:
    words = _words(motion)
    base = next((level for stems, level in _LEVELS if _has(words, stems)), 2)
    adv = _words(adverb)
    if _has(adv, BRISK):
        base += 1
    elif _has(adv, GENTLE):
        base -= 1
    return _clamp(base, 1, 5)


def predict(motion: str, adverb: str = "", n_characters: int = 1, time_of_day: str = "") -> Prediction:
    """The four values of one turn (see the module docstring for the rules)."""
    words = _words(motion)
    level = motion_level(motion, adverb)

    if _has(words, ("sleep", "nap")):
        stamina = 3
    elif _has(words, REST) and level <= 1:
        stamina = 2
    else:
        stamina = 2 - level

    social = (2 if _has(words, SOCIAL) else 0) + min(2, max(0, n_characters - 1))

    playful = _has(words, PLAYFUL)
    entertainment = (2 if playful else 0) - (1 if _has(words, CHORES) else 0) + (1 if _has(words, EATING) else 0)
    if playful and _has(_words(time_of_day), ("night", "evening")):
        entertainment += 1

    return Prediction(level, _clamp(social), _clamp(entertainment), _clamp(stamina))
