"""Each channel's configuration and its live game, kept in memory for autocomplete and rights
checks, which Discord runs on every keystroke.

Entries are dropped on write (the bot's own admin commands call `config_changed` after their
commit), across processes by NOTIFY (every settings write sends config_changed; a game that starts,
is joined, left, paused or reset sends session_changed; the notifier's connection to the service's
events relays both here), and wholesale whenever that connection is (re)established, since
notifications may have been missed meanwhile. A time-to-live bounds what a lost notification
could leave stale. Commands that write still read the database in their own transaction: the
cache only serves answers that change nothing.

Each lookup counts as a hit or a miss in the bot's animegamer_bot_config_cache_requests_total.
"""

from __future__ import annotations

import time

from bot.parts.metrics import BotMetrics
from game.channel_config import ChannelConfig
from service import configs
from service.configs import LiveCast
from service.runtime import Store
from settings import Settings


class ConfigCache:
    def __init__(self, db: Store, settings: Settings, metrics: BotMetrics, *, ttl: float = 300.0) -> None:
        self.db, self.settings, self.metrics = db, settings, metrics
        self.ttl = ttl
        self._configs: dict[tuple[int, int], tuple[float, ChannelConfig]] = {}  # (guild, channel) ->
        self._games: dict[int, tuple[float, LiveCast | None]] = {}  # channel ->
        # A load that raced an invalidation of its entry is not kept. Counted per guild (configs)
        # and per channel (games), plus once for wholesale drops: a busy bot's stream of game
        # changes elsewhere must not keep every other load from being kept.
        self._generation = 0  # bumped by every wholesale invalidation
        self._config_generations: dict[int, int] = {}  # guild -> bumped when its configuration changes
        self._game_generations: dict[int, int] = {}  # channel -> bumped when its game changes
        self.loads = 0  # database loads so far (tests and benchmarks read it)

    def _fresh(self, loaded_at: float) -> bool:
        return time.monotonic() - loaded_at < self.ttl

    async def config(self, guild_id: int, channel_id: int) -> ChannelConfig:
        entry = self._configs.get((guild_id, channel_id))
        hit = entry is not None and self._fresh(entry[0])
        self.metrics.cache(hit=hit)
        if entry is not None and hit:
            return entry[1]
        stamp = self._config_stamp(guild_id)
        cfg = await configs.channel_config(self.db.sessions, self.settings, guild_id, channel_id)
        self.loads += 1
        if stamp == self._config_stamp(guild_id):
            self._configs[(guild_id, channel_id)] = (time.monotonic(), cfg)
        return cfg

    async def live_game(self, channel_id: int) -> LiveCast | None:
        entry = self._games.get(channel_id)
        hit = entry is not None and self._fresh(entry[0])
        self.metrics.cache(hit=hit)
        if entry is not None and hit:
            return entry[1]
        stamp = (self._generation, self._game_generations.get(channel_id, 0))
        game = await configs.live_cast(self.db.sessions, channel_id)
        self.loads += 1
        if stamp == (self._generation, self._game_generations.get(channel_id, 0)):
            self._games[channel_id] = (time.monotonic(), game)
        return game

    def _config_stamp(self, guild_id: int) -> tuple[int, int]:
        return self._generation, self._config_generations.get(guild_id, 0)

    def config_changed(self, guild_id: int | None) -> None:
        """A guild's settings or one of its channels' changed (None: unknown, drop everything)."""
        if guild_id is None:
            self._generation += 1
            self._configs.clear()
            return
        guild_id = int(guild_id)
        self._config_generations[guild_id] = self._config_generations.get(guild_id, 0) + 1
        for key in [k for k in self._configs if k[0] == guild_id]:
            del self._configs[key]

    def session_changed(self, channel_id: int | None) -> None:
        if channel_id is None:
            self._generation += 1
            self._games.clear()
        else:
            channel_id = int(channel_id)
            self._game_generations[channel_id] = self._game_generations.get(channel_id, 0) + 1
            self._games.pop(channel_id, None)

    def clear(self) -> None:
        self._generation += 1
        self._configs.clear()
        self._games.clear()
