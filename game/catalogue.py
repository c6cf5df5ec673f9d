"""The film and character catalogue, as data.

Each film names the AnimeGamer checkpoint it was trained on and its playable characters. The
motions and backgrounds are suggestions for autocomplete; players may type anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from settings import Settings, SettingsError, load_settings


@dataclass(frozen=True)
class Character:
    id: str  # stable key stored in the database
    name: str  # how the model was trained to read the name in the instruction


@dataclass(frozen=True)
class Film:
    id: str
    title: str
    model_name: str  # suffix of the released checkpoints: MLLM-<name>, VDM_Decoder-<name>
    characters: tuple[Character, ...]
    motions: tuple[str, ...] = field(default=())
    adverbs: tuple[str, ...] = field(default=())
    backgrounds: tuple[str, ...] = field(default=())
    times: tuple[str, ...] = field(default=())

    def character(self, key: str) -> Character | None:
        """Find a character by id or by name, case-insensitively."""
        k = key.strip().casefold()
        for c in self.characters:
            if c.id.casefold() == k or c.name.casefold() == k:
                return c
        return None


# The released demo instructions use "day" and "night"; the others are suggestions.
_TIMES = ("day", "night", "morning", "evening", "sunset")
_ADVERBS = ("gently", "quickly", "smoothly", "slowly", "happily", "carefully", "excitedly", "calmly")

FILMS: dict[str, Film] = {
    f.id: f
    for f in (
        Film(
            id="qiqi",
            title="Kiki's Delivery Service (Qiqi's Delivery Service)",
            model_name="Qiqi",
            characters=(
                Character("qiqi", "Qiqi"),
                Character("jiji", "Jiji"),
                Character("tombo", "Tombo"),
                Character("osono", "Osono"),
                Character("ursula", "Ursula"),
            ),
            motions=(
                "fly on broomstick", "sit on railing", "turn head", "lie down", "hold broom",
                "walk", "run", "talk", "eat", "read a letter", "deliver a parcel", "smile", "wave",
            ),
            adverbs=_ADVERBS,
            backgrounds=(
                "sky", "countryside", "town", "grass", "street", "bedroom", "bakery", "forest",
                "clock tower", "beach",
            ),
            times=_TIMES,
        ),
        Film(
            id="ponyo",
            title="Ponyo on the Cliff by the Sea",
            model_name="Ponyo",
            characters=(
                Character("ponyo", "Ponyo"),
                Character("sosuke", "Sosuke"),
                Character("lisa", "Lisa"),
                Character("fujimoto", "Fujimoto"),
            ),
            motions=(
                "swim", "run", "jump", "eat ham", "sleep", "hug", "laugh", "walk", "drive",
                "ride the waves", "play with a bucket", "look at the sea",
            ),
            adverbs=_ADVERBS,
            backgrounds=(
                "sea", "cliff house", "underwater", "harbor", "road", "kindergarten",
                "storm", "boat", "garden",
            ),
            times=_TIMES,
        ),
    )
}

DEFAULT_FILM = "qiqi"


def get_film(film_id: str) -> Film:
    try:
        return FILMS[film_id]
    except KeyError:
        known = ", ".join(sorted(FILMS))
        raise KeyError(f"unknown film {film_id!r}; known films: {known}") from None


def suggest(options: tuple[str, ...], typed: str, limit: int = 25) -> list[str]:
    """Autocomplete: entries containing what was typed, prefix matches first (Discord shows <=25)."""
    t = typed.strip().casefold()
    pre = [o for o in options if o.casefold().startswith(t)]
    rest = [o for o in options if t in o.casefold() and o not in pre]
    return (pre + rest)[:limit]


def load_checked_settings(**overrides) -> Settings:
    """The settings, with the default film checked against this catalogue (the settings module
    sits below the game's rules, so it cannot know the films itself)."""
    settings = load_settings(**overrides)
    if settings.default_film not in FILMS:
        known = ", ".join(sorted(FILMS))
        raise SettingsError(
            f"invalid settings:\n  ANIMEGAMER_DEFAULT_FILM: unknown film {settings.default_film!r}; known: {known}"
        )
    return settings
